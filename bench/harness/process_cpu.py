"""CPU time spent by the processes that serve a turn: the benchmark process (client and
worker), the Temporal dev server, and the PostgreSQL backends serving the benchmark's database.

CPU time is what other people's work on a shared machine disturbs least, so it says where a
turn's cost goes even when wall-clock latency is noisy. Everything is read from
``/proc/<pid>/stat`` (utime + stime) except the benchmark's own process
(``time.process_time``, which is finer than the kernel's clock ticks) and PostgreSQL's
backends (``/proc/<pid>/schedstat``, in nanoseconds: a backend serves a few milliseconds per
turn, and a short run's whole share would round to nothing in clock ticks of 10 ms).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
_PROC = Path("/proc")
_SCHEDSTAT = (_PROC / "self" / "schedstat").exists()


@dataclass(frozen=True)
class CpuReading:
    """CPU seconds used so far (or, as a difference of two readings, in between)."""

    worker: float = 0.0
    server: float = 0.0
    postgresql: float = 0.0

    @property
    def total(self) -> float:
        return self.worker + self.server + self.postgresql

    def __sub__(self, other: CpuReading) -> CpuReading:
        return CpuReading(
            self.worker - other.worker,
            self.server - other.server,
            self.postgresql - other.postgresql,
        )

    def __add__(self, other: CpuReading) -> CpuReading:
        return CpuReading(
            self.worker + other.worker,
            self.server + other.server,
            self.postgresql + other.postgresql,
        )


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid``, or None once it has exited."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces; count the fields after its ')'.
    fields = raw.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def single_thread_cpu_seconds(pid: int) -> float | None:
    """Time on a CPU of a single-threaded process, to the nanosecond
    (``/proc/<pid>/schedstat``'s first field covers the process's one thread; ``/proc/<pid>/stat``
    counts whole clock ticks). ``process_cpu_seconds`` on a kernel without schedstat; None once
    the process has exited."""
    if not _SCHEDSTAT:
        return process_cpu_seconds(pid)
    try:
        raw = (_PROC / str(pid) / "schedstat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(raw.split()[0]) / 1e9


class PostgresBackends:
    """The server processes of one PostgreSQL database on this machine.

    PostgreSQL names each backend in its process title (``postgres: <cluster>: <user>
    <database> <client> <state>``), so the backends serving the benchmark's database are found
    by scanning ``/proc`` for that title (each backend is one single-threaded process, so its
    schedstat is exact); the PostgreSQL server is shared with other users of
    the machine, and its background processes (WAL writer, checkpointer) are left out because
    they work for every database at once. The first reading sets a baseline for the backends
    it finds; a backend that appears later counts whole (everything it did was for this
    database). One that exits between two readings loses what it used since the last (the
    workers' connection pools keep theirs open, so this is rare)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self._last: dict[int, float] | None = None
        self._used = 0.0

    def _backend_pids(self) -> list[int]:
        pids: list[int] = []
        for entry in _PROC.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                title = (entry / "cmdline").read_bytes()
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
            words = title.replace(b"\0", b" ").decode(errors="replace").split()
            if words[:1] == ["postgres:"] and self.database in words:
                pids.append(int(entry.name))
        return pids

    def cpu_seconds(self) -> float:
        """CPU seconds the database's backends used since this object was made."""
        now: dict[int, float] = {}
        for pid in self._backend_pids():
            used = single_thread_cpu_seconds(pid)
            if used is not None:
                now[pid] = used
        if self._last is not None:
            self._used += sum(used - self._last.get(pid, 0.0) for pid, used in now.items())
        self._last = now
        return self._used


class CpuMeter:
    """Reads the CPU of the benchmark process, the dev server and, once a PostgreSQL database
    is attached, its backends."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.postgres: PostgresBackends | None = None

    def attach_postgres(self, database: str) -> None:
        self.postgres = PostgresBackends(database)
        self.postgres.cpu_seconds()  # the first reading sets every backend's baseline

    def read(self) -> CpuReading:
        # The /proc scan for PostgreSQL's backends costs this process a few milliseconds; it
        # is taken before this process's own clock so a block's start does not count it (and
        # ``Samples.measuring`` reads the end in the opposite order).
        postgresql = self.postgres.cpu_seconds() if self.postgres else 0.0
        server = process_cpu_seconds(self.server_pid) if self.server_pid else None
        return CpuReading(time.process_time(), server or 0.0, postgresql)

    def read_end(self) -> CpuReading:
        """``read`` with this process's clock taken first: the end of a measured block."""
        worker = time.process_time()
        server = process_cpu_seconds(self.server_pid) if self.server_pid else None
        postgresql = self.postgres.cpu_seconds() if self.postgres else 0.0
        return CpuReading(worker, server or 0.0, postgresql)
