"""The benchmarks' CPU readings: a PostgreSQL backend's work is seen to the nanosecond, and
agrees with the kernel's clock-tick count of the same process."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from bench.process_cpu import PostgresBackends, process_cpu_seconds, single_thread_cpu_seconds
from tests.dbs import fresh_database

BUSY = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"


def test_a_single_threaded_process_reads_the_same_in_nanoseconds_and_in_ticks() -> None:
    # Busy for 0.3 s of CPU, then waits on stdin so both readings see the same finished work.
    proc = subprocess.Popen(
        [sys.executable, "-c", BUSY + "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        fine = 0.0
        while fine < 0.3:
            assert time.monotonic() < deadline, "the busy child never used 0.3 s of CPU"
            time.sleep(0.05)
            fine = single_thread_cpu_seconds(proc.pid) or 0.0
        time.sleep(0.1)  # the loop has ended: nothing more accrues
        fine = single_thread_cpu_seconds(proc.pid)
        ticks = process_cpu_seconds(proc.pid)
        assert fine is not None and ticks is not None
        # Python's start-up comes on top of the loop; clock ticks are 10 ms each.
        assert 0.3 <= fine < 2.0
        assert fine == pytest.approx(ticks, abs=0.05)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert single_thread_cpu_seconds(proc.pid) is None  # gone: no reading, no error


@pytest.mark.postgres
async def test_a_few_milliseconds_of_a_backends_work_are_counted() -> None:
    async with fresh_database("postgresql", "cpu") as url:
        database = make_url(url).database
        assert database
        engine = create_async_engine(url, poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))  # the backend exists: it sets the baseline
                backends = PostgresBackends(database)
                assert backends.cpu_seconds() == 0.0
                # Well under one 10 ms clock tick of work, which a tick count would miss.
                for _ in range(3):
                    await conn.execute(text("SELECT count(*) FROM generate_series(1, 2000)"))
                used = backends.cpu_seconds()
        finally:
            await engine.dispose()
    assert 0.0 < used < 1.0
