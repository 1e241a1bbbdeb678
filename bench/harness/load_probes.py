"""What the load run watches while it drives: the worker's memory, CPU and database connections,
and how much the machine itself made everyone wait for a CPU.

The machine is shared: CPU time a process got, next to the time its threads sat runnable but
waiting for a CPU (``/proc/<pid>/task/*/schedstat``), says whether a slow run was the
process's own doing or the machine's. ``/proc/pressure/cpu`` says the same machine-wide.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

SAMPLE_EVERY_SECONDS = 0.5


def proc_status_kib(pid: int, field_name: str) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (VmRSS: now, VmHWM: the high-water mark)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no {field_name}")


def sched_seconds(pid: int | None) -> tuple[float, float]:
    """(on a CPU, runnable but waiting for one) summed over the live threads of ``pid``."""
    if pid is None:
        return 0.0, 0.0
    running = waiting = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            with open(path) as f:
                ran, waited, _ = f.read().split()
            running += int(ran)
            waiting += int(waited)
    return running / 1e9, waiting / 1e9


def cpu_pressure_seconds() -> float | None:
    """Machine-wide: total time at least one task waited for a CPU (PSI), or None."""
    try:
        with open("/proc/pressure/cpu") as f:
            some = f.readline().split()
    except OSError:
        return None
    return int(some[-1].split("=")[1]) / 1e6


@dataclass
class Watch:
    """Samples, every half second: the worker's resident memory and the connections open to
    the run's database, by state (what the worker's SQL pool holds, seen from PostgreSQL)."""

    pid: int
    database_url: str
    rss_kib: list[int] = field(default_factory=list)
    #: time.perf_counter() of each sample in rss_kib
    rss_at: list[float] = field(default_factory=list)
    connections: list[dict[str, int]] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        admin = create_async_engine(self.database_url, poolclass=NullPool)
        database = make_url(self.database_url).database
        query = text(
            "SELECT state, count(*) FROM pg_stat_activity"
            " WHERE datname = :db AND pid <> pg_backend_pid() GROUP BY state"
        )
        try:
            async with admin.connect() as conn:
                while not self._stop.is_set():
                    self.rss_kib.append(proc_status_kib(self.pid, "VmRSS"))
                    self.rss_at.append(time.perf_counter())
                    rows = (await conn.execute(query, {"db": database})).all()
                    await conn.commit()  # a fresh snapshot of pg_stat_activity each time
                    self.connections.append({str(state): int(n) for state, n in rows})
                    with contextlib.suppress(TimeoutError):  # the next sample is due
                        await asyncio.wait_for(self._stop.wait(), SAMPLE_EVERY_SECONDS)
        finally:
            await admin.dispose()

    def stop(self) -> None:
        self._stop.set()

    def connection_report(self) -> dict[str, Any]:
        totals = [sum(c.values()) for c in self.connections]
        peak = max(totals, default=0)
        return {
            "samples": len(self.connections),
            "max_open": peak,
            "max_active": max((c.get("active", 0) for c in self.connections), default=0),
            "max_idle_in_transaction": max(
                (c.get("idle in transaction", 0) for c in self.connections), default=0
            ),
            "share_of_samples_at_max_open": round(totals.count(peak) / len(totals), 3)
            if totals
            else 0.0,
        }


@dataclass
class CpuReading:
    """CPU and CPU-wait seconds of the worker and the dev server, and machine CPU pressure."""

    worker: tuple[float, float]
    server: tuple[float, float]
    pressure: float | None

    @classmethod
    def now(cls, worker_pid: int, server_pid: int | None) -> CpuReading:
        return cls(sched_seconds(worker_pid), sched_seconds(server_pid), cpu_pressure_seconds())

    def since(self, start: CpuReading, wall: float, turns: int) -> dict[str, Any]:
        per_turn = 1000 / turns if turns else 0.0

        def process(now: tuple[float, float], then: tuple[float, float]) -> dict[str, float]:
            ran, waited = now[0] - then[0], now[1] - then[1]
            return {
                "cpu_seconds": round(ran, 1),
                "cpu_ms_per_turn": round(ran * per_turn, 2),
                # Seconds its threads were ready to run but the machine had no CPU for them.
                "waited_for_cpu_seconds": round(waited, 1),
            }

        out: dict[str, Any] = {
            "worker": process(self.worker, start.worker),
            "dev_server": process(self.server, start.server),
        }
        if self.pressure is not None and start.pressure is not None and wall:
            out["machine_cpu_pressure_some_pct"] = round(
                100 * (self.pressure - start.pressure) / wall, 1
            )
        return out
