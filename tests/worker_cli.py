"""The worker as its own process, the way a deployment runs it (``statecore worker``, or
``python worker.py`` which runs the same).

``async with worker_cli(args, env, log_path) as proc`` starts it, waits until it is polling
(or fails with its log), and stops it with SIGTERM afterwards (``proc.returncode`` then says
how it ended).
"""

from __future__ import annotations

import asyncio
import functools
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: What run_worker logs right before it starts polling.
READY_LINE = "statecore worker on task queue"


def base_env() -> dict[str, str]:
    """What a container has besides its configuration: a PATH and a HOME, and no
    temporal.toml (a developer's own profile would otherwise point the worker elsewhere)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "XDG_CONFIG_HOME": empty_config_home(),
    }


@functools.cache
def empty_config_home() -> str:
    """An empty folder to use as XDG_CONFIG_HOME: temporalio finds no default temporal.toml."""
    return tempfile.mkdtemp(prefix="statecore-no-temporal-config-")


@asynccontextmanager
async def worker_cli(
    args: Sequence[str],
    env: Mapping[str, str],
    log_path: Path,
    *,
    command: Sequence[str] = ("python", "worker.py"),
    ready_within: float = 60.0,
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """Run ``command`` from the repository root (``python`` is this interpreter, ``statecore``
    the command installed beside it)."""
    argv = [_installed(part) for part in command]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [*argv, *args],
            cwd=REPO,
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # pytest's Ctrl-C is not the worker's
        )
    try:
        await _wait_ready(proc, log_path, ready_within)
        yield proc
    finally:
        await _stop(proc)


def _installed(program: str) -> str:
    if program == "python":
        return sys.executable
    if program == "statecore":
        return str(Path(sys.executable).parent / "statecore")
    return program


async def _wait_ready(proc: subprocess.Popen[bytes], log_path: Path, within: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while READY_LINE not in log_path.read_text(errors="replace"):
        if proc.poll() is not None:
            raise AssertionError(
                f"{shlex_join(proc.args)} exited with {proc.returncode} before polling:\n"
                + log_tail(log_path)
            )
        if loop.time() > deadline:
            raise AssertionError(
                f"{shlex_join(proc.args)} not polling after {within}s:\n" + log_tail(log_path)
            )
        await asyncio.sleep(0.2)


async def _stop(proc: subprocess.Popen[bytes], within: float = 30.0) -> None:
    """SIGTERM, then wait without blocking the event loop (a test may serve the worker from
    it while it shuts down, e.g. a collector receiving its last spans)."""
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


def shlex_join(args: object) -> str:
    return shlex.join(str(a) for a in args) if isinstance(args, list) else str(args)


def log_tail(log_path: Path, lines: int = 40) -> str:
    return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
