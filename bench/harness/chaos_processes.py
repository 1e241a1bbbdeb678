"""The processes the chaos run breaks: a private PostgreSQL, the Temporal dev server, a worker.

The PostgreSQL cluster is the chaos run's own (initdb in a temporary folder, its own port), so
stopping it never disturbs anything else using the machine's server.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from statecore.temporal._devserver import DevServer, free_port

ROOT = Path(__file__).resolve().parents[2]


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (Debian postgresql package)")
    return found[-1]


def private_postgres_unavailable() -> str | None:
    """Why a private PostgreSQL cannot be run here, or None."""
    try:
        _pg_bin("initdb")
    except RuntimeError as exc:
        return str(exc)
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return "running a private PostgreSQL needs root (to run it as the postgres user)"
    return None


@dataclass
class PrivatePostgres:
    """A throw-away PostgreSQL cluster owned by the postgres user, trust auth, loopback only."""

    root: Path
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *cmd: str) -> None:
        done = subprocess.run(
            ["runuser", "-u", "postgres", "--", *cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{Path(cmd[0]).name} failed: {done.stderr.strip()[-500:]}")

    def init(self) -> PrivatePostgres:
        self.root.mkdir(parents=True, exist_ok=True)
        # The postgres user must be able to reach the folder (temporary folders are 0700).
        for parent in [self.root.parent]:
            parent.chmod(0o755)
        shutil.chown(self.root, "postgres", "postgres")
        self._as_postgres(
            _pg_bin("initdb"), "-D", str(self.root / "data"), "-U", "postgres", "--auth=trust"
        )
        return self

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=on"
        self._as_postgres(
            _pg_bin("pg_ctl"),
            "-D",
            str(self.root / "data"),
            "-o",
            options,
            "-l",
            str(self.root / "postgres.log"),
            "-w",
            "start",
        )

    def stop(self, *, crash: bool = False) -> None:
        """``crash`` stops it the way a power cut would (immediate, no checkpoint)."""
        mode = "immediate" if crash else "fast"
        self._as_postgres(
            _pg_bin("pg_ctl"), "-D", str(self.root / "data"), "-m", mode, "-w", "stop"
        )


class DevServerProcess:
    """The Temporal dev server on a fixed port and a persistent SQLite file, restartable."""

    def __init__(self, folder: Path) -> None:
        self.server = DevServer(
            port=free_port(),
            ui_port=None,
            db_filename=str(folder / "temporal.db"),
            log_path=str(folder / "temporal.log"),
        )

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> None:
        await self.server.start(ready_within=90)

    def stop(self) -> None:
        self.server.stop()


class WorkerProcess:
    """``bench.harness.chaos_worker`` in its own process group, so SIGKILL takes it down whole."""

    def __init__(self, address: str, task_queue: str, database_url: str, log: Path) -> None:
        self.args = [
            sys.executable,
            "-m",
            "bench.harness.chaos_worker",
            address,
            task_queue,
            database_url,
        ]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start a worker unless one is running (the supervisor and a kill event may both
        try; a second process would be orphaned)."""
        if self.alive():
            return
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def wait_port_closed(port: int, within: float = 10.0) -> None:
    import socket

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.1)
