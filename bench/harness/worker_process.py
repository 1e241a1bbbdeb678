"""The real ``statecore worker`` in a process of its own, for measuring what it costs.

CPU time of one process is what a shared, busy machine disturbs least: other people's work
makes a turn wait longer, but it does not make the worker execute more instructions. So the
worker runs alone in its process (the client that drives it stays in the benchmark's), and
its CPU per turn is read from ``/proc/<pid>/stat`` (user + system time).

``code`` lets a run use the statecore of another checkout (an exported older commit), so a
before/after comparison runs the two versions against the same server, interleaved.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What run_worker logs right before it starts polling.
READY_LINE = "statecore worker on task queue"
_TICKS = os.sysconf("SC_CLK_TCK")

# Runs the statecore CLI of the checkout in the working directory: ``python -c`` puts that
# directory first on the module path, ahead of the editable install.
_LAUNCH = (
    "import os, sys; import statecore; "
    "assert statecore.__file__.startswith(os.getcwd()), statecore.__file__; "
    "from statecore.cli import main; sys.argv[0] = 'statecore'; sys.exit(main())"
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)


def export_commit(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (this repository) unpacked under ``into``; returns its root."""
    target = into / rev.replace("/", "_")
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "statecore"],
        check=True,
        capture_output=True,
        timeout=60,
    ).stdout
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(target, filter="data")
    return target


@contextmanager
def exported_versions(before: str, after: str | None) -> Iterator[dict[str, Path]]:
    """``{"before": ..., "after": ...}``: the trees of two commits, unpacked for the block
    (``after`` None: this checkout itself), for a before/after run of two versions."""
    with tempfile.TemporaryDirectory(prefix="statecore-code-") as tmp:
        yield {
            "before": export_commit(before, Path(tmp)),
            "after": export_commit(after, Path(tmp)) if after else ROOT,
        }


def round_order(r: int) -> list[str]:
    """Which version runs first in round ``r`` (from 0): they alternate, A B, B A, ..., so
    a drift of the machine over the rounds weighs on both alike."""
    return ["before", "after"] if r % 2 == 0 else ["after", "before"]


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    task_queue: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.proc.pid)


@asynccontextmanager
async def worker_process(
    address: str,
    database_url: str,
    *,
    code: Path = ROOT,
    log_dir: Path,
    ready_within: float = 90.0,
    floor: bool = False,
) -> AsyncIterator[WorkerProcess]:
    """``statecore worker`` (offline model) on a fresh task queue, stopped with SIGTERM.
    With ``floor``, ``bench.harness.floor_worker`` instead: the same process shape with
    nothing of statecore in it (``database_url`` and ``code`` unused)."""
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    log_path = log_dir / f"worker-{queue}.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        # No developer's temporal.toml: the flags below are the whole configuration.
        "XDG_CONFIG_HOME": tempfile.mkdtemp(prefix="statecore-bench-config-"),
    }
    args = ["worker", "--address", address, "--task-queue", queue]
    args += ["--database-url", database_url, "--model", "offline"]
    argv = [sys.executable, "-c", _LAUNCH, *args]
    if floor:
        argv = [sys.executable, "-m", "bench.harness.floor_worker", address, queue]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT if floor else code,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        await _wait_ready(proc, log_path, ready_within)
        yield WorkerProcess(proc, queue, log_path)
    finally:
        await _stop(proc)


async def _wait_ready(proc: subprocess.Popen[bytes], log_path: Path, within: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while READY_LINE not in log_path.read_text(errors="replace"):
        if proc.poll() is not None or loop.time() > deadline:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
            what = f"exited with {proc.returncode}" if proc.poll() is not None else "not ready"
            raise RuntimeError(f"worker {what} after waiting up to {within}s:\n{tail}")
        await asyncio.sleep(0.2)


async def _stop(proc: subprocess.Popen[bytes], within: float = 30.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while proc.poll() is None:
        if loop.time() > deadline:
            proc.kill()
            await asyncio.to_thread(proc.wait, 10)
            return
        await asyncio.sleep(0.1)
