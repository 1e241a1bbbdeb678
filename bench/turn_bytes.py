"""SQL bytes a turn adds at turn 1,000, and how many of them are not the messages themselves.

    .venv/bin/python -m bench.turn_bytes                       # SQLite and PostgreSQL
    .venv/bin/python -m bench.turn_bytes --turns 100 --window 50   # smoke

It measures the statecore of the checkout it runs in: to measure an older commit, run it in a
worktree of that commit.

A turn here is what an AgentSession turn writes, through the same activity: ``generate``
with a commit (offline model), one user message in, the reply and the turn record out, on
one session. After ``--turns`` turns the database is measured, ``--window`` more turns run,
and it is measured again; bytes per turn is the growth divided by ``--window``, and "beyond
the messages" subtracts the UTF-8 bytes of the content those turns stored (user message and
reply). Sizes are what the database holds on disk for statecore's tables with their indexes:
SQLite's ``dbstat`` pages (after a WAL checkpoint), PostgreSQL's ``pg_total_relation_size``
after a plain ``VACUUM``. Every turn updates a few rows in place (the session header, the
latest-turn marker, the orchestration counters); PostgreSQL keeps each old version until a
vacuum, and autovacuum's default threshold (50 dead rows) clears such small tables about
every 25 turns, so ``--vacuum-every`` (default 25) runs a plain ``VACUUM`` that often during
the measured turns; ``--vacuum-every 0`` measures with none. Per-table growth is reported. Writes
``bench/results/turn_bytes.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.testing import ActivityEnvironment

import statecore
from bench.harness.environment import machine_info
from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import CommitTurnInput, GenerateInput
from statecore.core._models import Message, SessionRef
from statecore.llm._offline import OfflineModel
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import create_database, drop_database, server_down_reason

ROOT = Path(__file__).resolve().parent.parent
CONTENT = "turn {n}: please look at what we have so far and suggest the next step."
REF = SessionRef(namespace="default", agent_id="bench", session_id="bytes")
TARGET_BEYOND_MESSAGES = 1024


async def vacuum(url: str) -> None:
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.exec_driver_sql("VACUUM")
    finally:
        await engine.dispose()


async def table_bytes(url: str, tables: tuple[str, ...] | None = None) -> dict[str, int]:
    """Bytes on disk per table, its indexes (and TOAST) included: statecore's tables, or the
    ones named in ``tables``."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            if url.startswith("sqlite"):
                await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                rows = await conn.execute(
                    text(
                        "SELECT m.tbl_name, SUM(s.pgsize) FROM dbstat s "
                        "JOIN sqlite_master m ON m.name = s.name GROUP BY m.tbl_name"
                    )
                )
            else:
                rows = await conn.execute(
                    text(
                        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                    )
                )
            return {
                str(name): int(size)
                for name, size in rows
                if (str(name) in tables if tables else "statecore" in str(name))
            }
    finally:
        await engine.dispose()


async def measure(
    url: str,
    dialect: str,
    turns: int,
    window: int,
    vacuum_every: int,
) -> dict[str, Any]:
    """Bytes per turn over ``window`` turns after ``turns``."""
    await upgrade_database(url)
    store = await SqlStateStore.connect(url)
    resources = WorkerResources(models={"default": OfflineModel()})
    resources.attach(store)
    activities, env = TurnActivities(resources), ActivityEnvironment()
    content_bytes = 0

    async def turn(n: int) -> int:
        turn_id = f"turn-{n:06d}"
        user = Message(role="user", content=CONTENT.format(n=n))
        out = await env.run(
            activities.generate,
            GenerateInput(
                ref=REF,
                turn_id=turn_id,
                commit=CommitTurnInput(ref=REF, turn_id=turn_id, turn=n, messages=[user]),
            ),
        )
        return len(user.content.encode()) + len(out.message.content.encode())

    try:
        for n in range(1, turns + 1):
            await turn(n)
        postgres = dialect == "postgresql"
        if postgres:
            await vacuum(url)
        before = await table_bytes(url)
        for n in range(turns + 1, turns + window + 1):
            content_bytes += await turn(n)
            if postgres and vacuum_every and (n - turns) % vacuum_every == 0:
                await vacuum(url)
        if postgres:
            await vacuum(url)
        after = await table_bytes(url)
    finally:
        await store.close()
    growth = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    per_turn = sum(growth.values()) / window
    beyond = per_turn - content_bytes / window
    return {
        "dialect": dialect,
        "measured_after_turn": turns,
        "turns_measured": window,
        "vacuum_every": vacuum_every if dialect == "postgresql" else None,
        "bytes_per_turn": round(per_turn, 1),
        "message_content_bytes_per_turn": round(content_bytes / window, 1),
        "beyond_messages_per_turn": round(beyond, 1),
        "target_beyond_messages": TARGET_BEYOND_MESSAGES,
        "met": beyond <= TARGET_BEYOND_MESSAGES,
        "growth_per_turn_by_table": {
            name: round(g / window, 1) for name, g in sorted(growth.items()) if g
        },
        "total_bytes_at_end": sum(after.values()),
    }


async def run(a: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for dialect in a.db:
        if dialect == "sqlite":
            with tempfile.TemporaryDirectory(prefix="statecore-bytes-") as tmp:
                url = f"sqlite+aiosqlite:///{tmp}/bytes.db"
                results[dialect] = await measure(url, dialect, a.turns, a.window, a.vacuum_every)
        else:
            reason = await server_down_reason(dialect)
            if reason is not None:
                results[dialect] = {"skipped": reason}
                continue
            url = await create_database(dialect, "bytes")
            try:
                results[dialect] = await measure(url, dialect, a.turns, a.window, a.vacuum_every)
            finally:
                await drop_database(url)
        print(json.dumps(results[dialect], indent=2))
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", type=int, default=1000, help="turns before measuring")
    p.add_argument("--window", type=int, default=200, help="turns measured")
    p.add_argument("--db", nargs="+", default=["sqlite", "postgresql"])
    p.add_argument("--vacuum-every", type=int, default=25, help="PostgreSQL; 0: never")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "turn_bytes.json")
    a = p.parse_args(argv)
    results = asyncio.run(run(a))
    doc = {
        "what": "SQL bytes per AgentSession-shaped turn at turn --turns, beyond message content",
        "statecore": str(Path(statecore.__file__).parent),
        "results": results,
        "machine": machine_info(),
    }
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
