"""What PostgreSQL adds to a chat turn next to SQLite: its backends' CPU and the wait for the
WAL flush at COMMIT.

    .venv/bin/python bench/pg_share.py                          # 12 rounds x 200 turns
    .venv/bin/python bench/pg_share.py --rounds 2 --turns 20    # smoke

At one session on this 2-core machine a turn's latency is close to the sum of the CPU its
processes spend (bench/turns.py's CPU columns), so PostgreSQL's own CPU lands in the latency
whole. This separates the parts of what PostgreSQL adds to the turn's activity. One process
drives the chat turn's activity (``generate`` with a commit, offline model), as
bench/activity_cpu.py does, against three stores, one session each:

- ``sqlite``: a SQLite file;
- ``postgresql``: a fresh PostgreSQL database, as configured (``synchronous_commit = on``,
  PostgreSQL's default: COMMIT returns once the WAL is flushed to disk);
- ``postgresql_async``: the same database with ``synchronous_commit = off`` on its
  connections, so COMMIT does not wait for the flush. It is a measuring device only: statecore
  never sets it, and it must not be set under statecore, since a turn the activity reported
  committed could then be lost with the server.

Each round runs ``--turns`` turns of each, in an order that rotates from round to round; every
``--session-turns`` turns (40) a variant moves to a new session, whose first turn creates it,
as an AgentSession's compaction keeps a window short (see ``turn_runner``).
Per block: wall time per turn, this process's CPU per turn and the CPU of the database's
backends per turn (``/proc``, by the backends' process titles). Reported: each variant's mean
with a 95% interval, and paired by round: postgresql - sqlite (what PostgreSQL adds) and
postgresql - postgresql_async (what waiting for the flush adds). Before every round the
database gets a ``VACUUM ANALYZE``, which autovacuum would run on its own: it is off on this
machine's server (the result records the setting), and without statistics, or with a
near-empty database's, the planner's choices drift as the tables grow. Writes
``bench/results/pg_share.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from tempfile import TemporaryDirectory  # noqa: E402
from typing import Any  # noqa: E402

from sqlalchemy import text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402
from temporalio.testing import ActivityEnvironment  # noqa: E402

from bench.cpu_per_turn import summary  # noqa: E402
from bench.environment import machine_info  # noqa: E402
from bench.process_cpu import PostgresBackends  # noqa: E402
from statecore.activities._resources import WorkerResources  # noqa: E402
from statecore.activities._turns import TurnActivities  # noqa: E402
from statecore.contract._activities import CommitTurnInput, GenerateInput  # noqa: E402
from statecore.core._models import Message, SessionRef  # noqa: E402
from statecore.llm._offline import OfflineModel  # noqa: E402
from statecore.store._migrate import upgrade_database  # noqa: E402
from statecore.store.sql import SqlStateStore  # noqa: E402
from tests.dbs import create_database, drop_database, server_down_reason  # noqa: E402

RESULTS = ROOT / "bench" / "results"
CONTENT = "turn {n}: please look at what we have so far and suggest the next step."
VARIANTS = ("sqlite", "postgresql", "postgresql_async")


@dataclass
class Variant:
    """One store and its session, and what its blocks measured (per turn, in ms)."""

    name: str
    turn: Callable[[int], Awaitable[None]]
    backends: PostgresBackends | None
    next_turn: int = 1
    wall: list[float] = field(default_factory=list)
    worker: list[float] = field(default_factory=list)
    postgresql: list[float] = field(default_factory=list)

    async def block(self, turns: int, record: bool = True) -> None:
        pg_before = self.backends.cpu_seconds() if self.backends else 0.0
        cpu, wall = time.process_time(), time.perf_counter()
        for n in range(self.next_turn, self.next_turn + turns):
            await self.turn(n)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        pg = (self.backends.cpu_seconds() if self.backends else 0.0) - pg_before
        self.next_turn += turns
        if record:
            self.wall.append(1000 * wall / turns)
            self.worker.append(1000 * cpu / turns)
            self.postgresql.append(1000 * pg / turns)


def turn_runner(
    store: SqlStateStore, name: str, session_turns: int
) -> Callable[[int], Awaitable[None]]:
    """The ``n``-th chat turn through the activity an AgentSession turn runs. Every
    ``session_turns`` turns go to a new session: an AgentSession's automatic compaction keeps
    its window short, which this activity alone would not, and a window growing through the
    whole run would make context assembly the larger part of each turn."""
    resources = WorkerResources(models={"default": OfflineModel()})
    resources.attach(store)
    activities, env = TurnActivities(resources), ActivityEnvironment()

    async def turn(n: int) -> None:
        session, number = divmod(n - 1, session_turns)
        ref = SessionRef(agent_id="bench", session_id=f"share-{name}-{session}")
        turn_id = f"turn-{number + 1:06d}"
        user = Message(role="user", content=CONTENT.format(n=number + 1))
        commit = CommitTurnInput(ref=ref, turn_id=turn_id, turn=number + 1, messages=[user])
        await env.run(activities.generate, GenerateInput(ref=ref, turn_id=turn_id, commit=commit))

    return turn


async def run(rounds: int, turns: int, warmup: int, session_turns: int) -> dict[str, Any]:
    reason = await server_down_reason("postgresql")
    if reason is not None:
        raise SystemExit(f"postgresql is not reachable: {reason}")
    load_start = os.getloadavg()[0]
    pg_url = await create_database("postgresql", "share")
    database = str(make_url(pg_url).database)
    stores: list[SqlStateStore] = []
    # VACUUM cannot run inside a transaction block: its own engine, in autocommit.
    maintenance = create_async_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with TemporaryDirectory(prefix="statecore-pg-share-") as tmp:
            sqlite_url = f"sqlite+aiosqlite:///{tmp}/share.db"
            for url in (sqlite_url, pg_url):
                await upgrade_database(url)
            stores.append(await SqlStateStore.connect(sqlite_url))
            stores.append(await SqlStateStore.connect(pg_url))
            stores.append(
                await SqlStateStore.connect(
                    pg_url, connect_args={"server_settings": {"synchronous_commit": "off"}}
                )
            )
            backends = PostgresBackends(database)
            variants = [
                Variant(
                    name, turn_runner(store, name, session_turns), None if i == 0 else backends
                )
                for i, (name, store) in enumerate(zip(VARIANTS, stores, strict=True))
            ]
            for v in variants:
                await v.block(warmup, record=False)
            async with maintenance.connect() as conn:
                autovacuum = (await conn.execute(text("SHOW autovacuum"))).scalar_one()
            for r in range(rounds):
                # Before every round, what autovacuum does on its own (off on this machine's
                # server): row versions that turns updated go, and the statistics follow the
                # growing tables (the planner's choices would otherwise rest on a near-empty
                # database's).
                async with maintenance.connect() as conn:
                    await conn.execute(text("VACUUM ANALYZE"))
                order = variants[r % 3 :] + variants[: r % 3]
                if r % 2:
                    order.reverse()
                for v in order:
                    await v.block(turns)
                print(
                    f"round {r + 1}/{rounds}: "
                    + ", ".join(
                        f"{v.name} {v.wall[-1]:.2f} ms (pg cpu {v.postgresql[-1]:.2f})"
                        for v in variants
                    ),
                    flush=True,
                )
    finally:
        await maintenance.dispose()
        for store in stores:
            await store.close()
        await drop_database(pg_url)
    by = {v.name: v for v in variants}

    def paired(a: str, b: str, what: str) -> dict[str, Any]:
        first, second = getattr(by[a], what), getattr(by[b], what)
        return summary([x - y for x, y in zip(first, second, strict=True)])

    return {
        "benchmark": "pg_share",
        "what": "ms per chat turn of the generate(commit) activity alone (offline model)",
        "command": " ".join([".venv/bin/python bench/pg_share.py", *sys.argv[1:]]),
        "rounds": rounds,
        "turns_per_block": turns,
        "warmup_turns": warmup,
        "turns_per_session": session_turns,
        "server_autovacuum": autovacuum,
        "variants": {
            v.name: {
                "wall": summary(v.wall),
                "worker_cpu": summary(v.worker),
                "postgresql_cpu": summary(v.postgresql),
            }
            for v in variants
        },
        "postgresql_minus_sqlite": {
            what: paired("postgresql", "sqlite", what) for what in ("wall", "worker")
        },
        "flush_wait": paired("postgresql", "postgresql_async", "wall"),
        "load_average_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "machine": machine_info(),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--turns", type=int, default=200, help="turns per variant per round")
    p.add_argument("--warmup", type=int, default=30, help="turns per variant before round 1")
    p.add_argument("--session-turns", type=int, default=40, help="turns before a new session")
    p.add_argument("--out", type=Path, default=RESULTS / "pg_share.json")
    a = p.parse_args(argv)
    if a.rounds < 2:
        p.error("--rounds must be at least 2 for a confidence interval")
    result = asyncio.run(run(a.rounds, a.turns, a.warmup, a.session_turns))
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, v in result["variants"].items():
        print(
            f"{name}: wall {v['wall']['mean']:.2f} ms, worker cpu {v['worker_cpu']['mean']:.2f}, "
            f"postgresql cpu {v['postgresql_cpu']['mean']:.2f}"
        )
    for key in ("postgresql_minus_sqlite", "flush_wait"):
        block = result[key]
        for what, s in (block.items() if key != "flush_wait" else [("wall", block)]):
            low, high = s["ci95"]
            print(f"{key} {what}: {s['mean']:.2f} ms, 95% CI {low:.2f} .. {high:.2f}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
