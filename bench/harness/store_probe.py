"""Evidence for the storage benchmark: which SQL statements an operation runs, how the
database executes them, and how much text it tokenises.

- ``StatementLog`` listens to the engine (``before_cursor_execute``) and counts, or records,
  every statement sent to the database.
- ``explain`` asks the database for each recorded statement's plan: PostgreSQL runs it under
  ``EXPLAIN (ANALYZE, BUFFERS)`` inside a transaction that is rolled back (actual rows and
  pages touched); SQLite answers ``EXPLAIN QUERY PLAN``. A plan that reads the whole
  ``messages`` table (a sequential scan, or a SQLite ``SCAN`` of it) is flagged.
- ``CountingTokenCounter`` is the real TokenCounter that also adds up the characters it
  tokenises, which shows whether context assembly re-tokenises the history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from statecore.core._tokens import TokenCounter

# SQLite's EXPLAIN QUERY PLAN says "SCAN <table>" when it walks a whole table or index and
# "SEARCH <table> USING ..." when it seeks.
_SQLITE_FULL_SCAN = re.compile(r"^SCAN (messages)\b")


class CountingTokenCounter(TokenCounter):
    """Counts like TokenCounter and keeps the number of characters it was asked to count."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        super().__init__(encoding)
        self.characters = 0

    def count_text(self, text: str) -> int:
        self.characters += len(text)
        return super().count_text(text)


class StatementLog:
    """Statements an engine sends (BEGIN excluded: SQLite's is explicit, PostgreSQL's is not,
    so counts compare across dialects)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.count = 0
        self._recorded: list[tuple[str, Any]] | None = None
        event.listen(engine.sync_engine, "before_cursor_execute", self._seen)

    def _seen(
        self, _conn: Any, _cursor: Any, statement: str, params: Any, _ctx: Any, _many: bool
    ) -> None:
        if statement.lstrip().upper().startswith("BEGIN"):
            return
        self.count += 1
        if self._recorded is not None:
            self._recorded.append((statement, params))

    @contextmanager
    def recording(self) -> Iterator[list[tuple[str, Any]]]:
        """The statements sent while the block runs, with their parameters."""
        self._recorded = recorded = []
        try:
            yield recorded
        finally:
            self._recorded = None


def _short(statement: str) -> str:
    one_line = " ".join(statement.split())
    return one_line if len(one_line) <= 160 else one_line[:157] + "..."


def _pg_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _pg_nodes(child)


def _pg_summary(plan: dict[str, Any]) -> dict[str, Any]:
    nodes = list(_pg_nodes(plan["Plan"]))
    scans = [
        n["Node Type"]
        + (f" on {n['Relation Name']}" if "Relation Name" in n else "")
        + (f" using {n['Index Name']}" if "Index Name" in n else "")
        for n in nodes
        if "Relation Name" in n or "Index Name" in n
    ]
    top = plan["Plan"]
    jit = plan.get("JIT", {})
    return {
        "scans": scans,
        "full_scan_of_messages": any(
            n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "messages" for n in nodes
        ),
        # Pages touched by the statement (its children included): flat if nothing scans.
        "buffers": top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
        "rows_read_from_messages": sum(
            int(n.get("Actual Rows", 0)) * int(n.get("Actual Loops", 1))
            for n in nodes
            if n.get("Relation Name") == "messages" and "Scan" in n["Node Type"]
        ),
        # What the planner expected: a wrong guess here is what makes a plan costly.
        "estimated_rows_from_messages": sum(
            int(n.get("Plan Rows", 0))
            for n in nodes
            if n.get("Relation Name") == "messages" and "Scan" in n["Node Type"]
        ),
        "estimated_cost": top.get("Total Cost"),
        # PostgreSQL compiles a plan whose estimated cost passes jit_above_cost (100,000).
        "jit_ms": round(jit.get("Timing", {}).get("Total", 0.0), 3),
        "planning_ms": round(plan.get("Planning Time", 0.0), 3),
        "execution_ms": round(plan.get("Execution Time", 0.0), 3),
    }


async def explain(
    engine: AsyncEngine, dialect: str, statements: list[tuple[str, Any]]
) -> list[dict[str, Any]]:
    """The plan of every recorded statement, in order, each also run once to see what it
    does (in a transaction rolled back afterwards: nothing they write is kept)."""
    async with engine.connect() as conn:
        transaction = await conn.begin()
        try:
            if dialect == "postgresql":
                return [await _explain_postgresql(conn, s, p) for s, p in statements]
            return await _explain_sqlite(conn, statements)
        finally:
            await transaction.rollback()


async def _explain_postgresql(conn: AsyncConnection, statement: str, params: Any) -> dict[str, Any]:
    found = await conn.exec_driver_sql(
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params
    )
    raw = found.scalar_one()
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]
    return {"statement": _short(statement), **_pg_summary(plan)}


async def _explain_sqlite(
    conn: AsyncConnection, statements: list[tuple[str, Any]]
) -> list[dict[str, Any]]:
    # EXPLAIN QUERY PLAN names the index but not which bound it seeks on: "seq>?" reads the
    # same for a seek to the window and for a seek to seq 1 that filters every row after it.
    # Counting the virtual machine's instructions while the statement runs tells them apart.
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0  # carry on

    out: list[dict[str, Any]] = []
    await driver.set_progress_handler(tick, 1)
    try:
        for statement, params in statements:
            found = await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params)
            details = [row[3] for row in found]
            steps[0] = 0
            await conn.exec_driver_sql(statement, params)
            out.append(
                {
                    "statement": _short(statement),
                    "scans": details,
                    "full_scan_of_messages": any(_SQLITE_FULL_SCAN.match(d) for d in details),
                    "vm_instructions": steps[0],
                }
            )
    finally:
        await driver.set_progress_handler(None, 1)
    return out
