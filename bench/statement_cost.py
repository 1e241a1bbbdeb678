"""CPU per statement: a turn's prebuilt statement sent directly, against SQLAlchemy's execution.

    .venv/bin/python bench/statement_cost.py                     # SQLite and PostgreSQL
    .venv/bin/python bench/statement_cost.py --db sqlite --statements 500 --rounds 2   # smoke

Inside one transaction of a real store, the session header read of every turn
(``select_session``, by its unique key) runs ``--statements`` times through
``SqlContext.execute``: directly (``statecore.store.sql._direct``), then through SQLAlchemy
(a no-op ``before_cursor_execute`` listener on the engine sends every statement there), the
order alternating by round. CPU time (``time.process_time``: every thread of the process)
per statement; mean over rounds with a 95% interval, and the paired difference. Writes
``bench/results/statement_cost.json``.
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
import time  # noqa: E402
from tempfile import TemporaryDirectory  # noqa: E402
from typing import Any  # noqa: E402

from sqlalchemy import event  # noqa: E402

from bench.cpu_per_turn import summary  # noqa: E402
from bench.environment import machine_info  # noqa: E402
from bench.profile_turn import database  # noqa: E402
from statecore.core._models import SessionRef  # noqa: E402
from statecore.store._migrate import upgrade_database  # noqa: E402
from statecore.store.sql import SqlStateStore  # noqa: E402
from statecore.store.sql import _direct as direct  # noqa: E402
from statecore.store.sql._context import SqlContext, select_session  # noqa: E402

RESULTS = ROOT / "bench" / "results"
REF = SessionRef(namespace="bench", agent_id="agent", session_id="statement-cost")
PARAMS = {"p_namespace": "bench", "p_agent_id": "agent", "p_session_id": "statement-cost"}


def _nothing(*_: Any) -> None:
    """A listener that only makes SQLAlchemy execute every statement itself."""


async def one_block(store: SqlStateStore, way: str, statements: int) -> float:
    """CPU ms per statement for ``statements`` header reads in one transaction."""
    engine = store.engine.sync_engine
    if way == "sqlalchemy":
        event.listen(engine, "before_cursor_execute", _nothing)
    try:
        async with store.transaction() as tx:
            ctx: SqlContext = tx._ctx  # type: ignore[attr-defined]
            first = await ctx.execute(select_session(False), PARAMS)
            assert isinstance(first, direct.DirectResult) == (way == "direct"), way
            cpu = time.process_time()
            for _ in range(statements):
                (await ctx.execute(select_session(False), PARAMS)).first()
            return 1000 * (time.process_time() - cpu) / statements
    finally:
        if way == "sqlalchemy":
            event.remove(engine, "before_cursor_execute", _nothing)


async def measure_db(db: str, rounds: int, statements: int) -> dict[str, Any]:
    with TemporaryDirectory(prefix="statecore-statements-") as tmp:
        async with database(db, Path(tmp)) as url:
            await upgrade_database(url)
            store = await SqlStateStore.connect(url)
            try:
                async with store.transaction() as tx:
                    await tx.sessions.ensure(REF)
                got: dict[str, list[float]] = {"direct": [], "sqlalchemy": []}
                for r in range(rounds):
                    order = ("direct", "sqlalchemy") if r % 2 == 0 else ("sqlalchemy", "direct")
                    for way in order:
                        got[way].append(await one_block(store, way, statements))
                    print(
                        f"{db} round {r + 1}/{rounds}: direct {got['direct'][-1]:.4f}, "
                        f"sqlalchemy {got['sqlalchemy'][-1]:.4f} ms CPU/statement",
                        flush=True,
                    )
            finally:
                await store.close()
    return {
        "direct": summary(got["direct"]),
        "sqlalchemy": summary(got["sqlalchemy"]),
        "sqlalchemy_minus_direct": summary(
            [s - d for s, d in zip(got["sqlalchemy"], got["direct"], strict=True)]
        ),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--db", choices=("sqlite", "postgresql"), action="append")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--statements", type=int, default=3000, help="statements per block")
    p.add_argument("--out", type=Path, default=RESULTS / "statement_cost.json")
    a = p.parse_args(argv)
    if a.rounds < 2:
        p.error("--rounds must be at least 2 for a confidence interval")
    started = time.monotonic()
    result: dict[str, Any] = {
        "what": "CPU ms per statement: the session header read, direct and through SQLAlchemy",
        "rounds": a.rounds,
        "statements_per_block": a.statements,
    }
    for db in a.db or ["sqlite", "postgresql"]:
        result[db] = asyncio.run(measure_db(db, a.rounds, a.statements))
    result["wall_minutes"] = round((time.monotonic() - started) / 60, 1)
    result["machine"] = machine_info()
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    for db in a.db or ["sqlite", "postgresql"]:
        row = result[db]
        print(
            f"{db}: direct {row['direct']['mean']:.4f}, sqlalchemy {row['sqlalchemy']['mean']:.4f}"
            f", difference {row['sqlalchemy_minus_direct']['mean']:.4f} ms "
            f"(95% CI {row['sqlalchemy_minus_direct']['ci95'][0]:.4f} .. "
            f"{row['sqlalchemy_minus_direct']['ci95'][1]:.4f})"
        )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
