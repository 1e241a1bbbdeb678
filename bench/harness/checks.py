"""Self-checks of the benchmarks' own machinery. The test suite runs them as a process, so the
tests never import bench; anyone changing the harness can run them too.

    .venv/bin/python -m bench.harness.checks stats         # intervals, t quantiles, pauses
    .venv/bin/python -m bench.harness.checks cpu           # CPU readings of a process
    .venv/bin/python -m bench.harness.checks cpu --postgres-url URL   # and of its backends
    .venv/bin/python -m bench.harness.checks state-turns --address HOST:PORT

- ``stats``: ``round_stats``' t quantiles match the published table, a mean's interval is
  Student's t over the values, a ratio's interval is symmetric in logarithms; the pause
  before a 1-session turn (``measure.sequential``) counts in neither its latency nor the
  block's wall time.
- ``cpu``: ``process_cpu`` reads a single-threaded process's CPU in nanoseconds and in clock
  ticks alike, and nothing once it is gone; with ``--postgres-url`` (a database of its own),
  a few milliseconds of a backend's work are counted.
- ``state-turns``: on the given dev server, the turn benchmark's state-only turns
  (``state_turns.StateSession``, driven as ``bench.turns`` drives them) each commit one KV put
  and one message, and the reading variant reads first.

Each check prints ``ok <check>`` when everything holds; a failure raises (exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.harness.round_stats import mean_interval, ratio_interval, t_quantile


def _close(a: float, b: float, tol: float) -> bool:
    return math.isclose(a, b, rel_tol=0, abs_tol=tol)


def check_stats() -> None:
    from bench.harness.measure import Samples, Scenario, sequential

    table = {1: 12.7062, 2: 4.3027, 5: 2.5706, 10: 2.2281, 19: 2.0930, 31: 2.0395}
    for df, expected in table.items():
        assert _close(t_quantile(df), expected, 5e-4), (df, t_quantile(df), expected)
    try:
        t_quantile(0)
    except ValueError:
        pass
    else:
        raise AssertionError("t_quantile(0) has no value")

    mean, low, high = mean_interval([10.0, 12.0, 14.0, 16.0])
    half = 3.1824 * math.sqrt(20 / 3) / 2  # t(3) * sample sd / sqrt(n)
    assert mean == 13.0
    assert _close(low, 13.0 - half, 1e-3) and _close(high, 13.0 + half, 1e-3), (low, high)
    assert mean_interval([5.0]) == (5.0, 5.0, 5.0)

    geo, low, high = ratio_interval([1.0, 1.21])
    assert _close(geo, 1.1, 1e-9) and _close(low * high, geo * geo, 1e-9)
    inverse = ratio_interval([1.0, 1 / 1.21])
    assert _close(inverse[0], 1 / geo, 1e-9)
    assert _close(inverse[1], 1 / high, 1e-9) and _close(inverse[2], 1 / low, 1e-9)

    async def send(session_id: str, n: int, turn_id: str) -> None:
        await asyncio.sleep(0.01)

    scenario = Scenario("s", "a 10 ms turn", send, lambda s: s, "tq")
    into = Samples()
    asyncio.run(sequential(scenario, "x", 0, 5, into, pause=lambda: 0.05))
    assert len(into.latencies) == 5
    assert all(0.01 <= x < 0.05 for x in into.latencies), into.latencies
    assert 0.25 <= into.paused_seconds < 1.0, into.paused_seconds
    # The block's wall time is the turns' own: five 10 ms turns, not the 250 ms of pauses.
    turns = sum(into.latencies)
    assert turns <= into.wall_seconds < turns + 0.05, (turns, into.wall_seconds)


_BUSY = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"


def check_cpu(postgres_url: str | None) -> None:
    from bench.harness.process_cpu import process_cpu_seconds, single_thread_cpu_seconds

    # Busy for 0.3 s of CPU, then waits on stdin so both readings see the same finished work.
    proc = subprocess.Popen(
        [sys.executable, "-c", _BUSY + "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        fine = 0.0
        while fine < 0.3:
            assert time.monotonic() < deadline, "the busy child never used 0.3 s of CPU"
            time.sleep(0.05)
            fine = single_thread_cpu_seconds(proc.pid) or 0.0
        time.sleep(0.1)  # the loop has ended: nothing more accrues
        reading = single_thread_cpu_seconds(proc.pid)
        ticks = process_cpu_seconds(proc.pid)
        assert reading is not None and ticks is not None
        # Python's start-up comes on top of the loop; clock ticks are 10 ms each.
        assert 0.3 <= reading < 2.0, reading
        assert _close(reading, ticks, 0.05), (reading, ticks)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert single_thread_cpu_seconds(proc.pid) is None  # gone: no reading, no error
    if postgres_url:
        used = asyncio.run(_backend_cpu(postgres_url))
        assert 0.0 < used < 1.0, used


async def _backend_cpu(url: str) -> float:
    from sqlalchemy import text
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    from bench.harness.process_cpu import PostgresBackends

    database = make_url(url).database
    assert database, url
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))  # the backend exists: it sets the baseline
            backends = PostgresBackends(database)
            assert backends.cpu_seconds() == 0.0
            # Well under one 10 ms clock tick of work, which a tick count would miss.
            for _ in range(3):
                await conn.execute(text("SELECT count(*) FROM generate_series(1, 2000)"))
            return backends.cpu_seconds()
    finally:
        await engine.dispose()


async def check_state_turns(address: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from bench.harness.floor import FloorSession, noop
    from bench.harness.measure import Samples, floor_scenario, sequential
    from bench.harness.state_turns import STATE_AGENT, STATE_WORKFLOW, StateSession
    from statecore.core._models import SessionRef
    from statecore.store import open_store
    from statecore.store._migrate import upgrade_database
    from statecore.temporal._plugin import StatecorePlugin

    with tempfile.TemporaryDirectory(prefix="statecore-checks-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'state.db'}"
        await upgrade_database(url)
        plugin = StatecorePlugin(
            url, extra_workflows=[StateSession, FloorSession], extra_activities=[noop]
        )
        client = await Client.connect(address, plugins=[plugin])
        queue = f"checks-{uuid.uuid4().hex[:8]}"
        run = uuid.uuid4().hex[:8]
        plain_id, reads_id = f"plain-{run}", f"reads-{run}"
        async with Worker(client, task_queue=queue):
            plain = floor_scenario("state", "", client, queue, "turn", workflow_type=STATE_WORKFLOW)
            reads = floor_scenario(
                "reads", "", client, queue, "turn_reads", workflow_type=STATE_WORKFLOW
            )
            samples = Samples()
            await sequential(plain, plain_id, 0, 3, samples)
            await sequential(reads, reads_id, 0, 2, samples)
        assert len(samples.latencies) == 5, samples.latencies
        store = await open_store(url)
        try:
            async with store.transaction() as tx:
                for session, turns in ((plain_id, 3), (reads_id, 2)):
                    ref = SessionRef(agent_id=STATE_AGENT, session_id=session)
                    log = await tx.conversation.messages(ref)
                    note = await tx.kv.get(ref.kv_scope, "notes", "last")
                    assert [m.role for m in log] == ["user"] * turns, log
                    assert note is not None and note.value == {"turn": turns}, note
                    assert note.revision == turns, note
        finally:
            await store.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("check", choices=["stats", "cpu", "state-turns"])
    p.add_argument("--postgres-url", help="cpu: a PostgreSQL database of its own to read")
    p.add_argument("--address", help="state-turns: a running Temporal dev server")
    a = p.parse_args(argv)
    if a.check == "stats":
        check_stats()
    elif a.check == "cpu":
        check_cpu(a.postgres_url)
    else:
        if not a.address:
            p.error("state-turns needs --address")
        asyncio.run(check_state_turns(a.address))
    print(f"ok {a.check}")


if __name__ == "__main__":
    main()
