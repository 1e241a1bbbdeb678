"""What one chat turn costs in SQL: the model-and-commit activity runs the same statements at
turn 5 and turn 40, reads the session's header row once per transaction, and stays within a
fixed statement budget (a read transaction for the context, one for the commit). On a server
database the context read is one statement once the process holds the session's window: the
header, the turn's record and the window's new rows together."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event
from temporalio.testing import ActivityEnvironment

from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import CommitTurnInput, GenerateInput, GenerateResult, KVOp
from statecore.core._models import Message, SessionRef
from statecore.llm._offline import OfflineModel
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database
from tests.statement_log import StatementLog

DIALECTS = [
    pytest.param("sqlite"),
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mariadb),
]
REF = SessionRef(namespace="cost", agent_id="agent", session_id="s1")
#: Context read: the header with the turn's record, whether the session has hints and, on
#: PostgreSQL and MariaDB, the window from the cached window's newest row on beside it (one
#: statement; on SQLite the window is a statement of its own), the hints (only if it has
#: any), the window's boundary (once the log outgrows the budget). Commit: header
#: (locked), the turn's existing messages, insert, counters with the idle clock, the usage added
#: in place, the window's first message, the turn record, the latest turn, and the change feed
#: (two statements: numbering and events; three on MariaDB). On SQLite and PostgreSQL the
#: locked header read also tells that the turn has no messages yet (SqlContext.
#: find_session_for_turn), and the counters' UPDATE returns the window's first message
#: (SqlContext.append_to_log). On PostgreSQL the insert rides in that UPDATE too, and the
#: usage, the turn record, the latest turn and the change feed are one statement
#: (statecore/store/sql/_turn_commit.py). MariaDB inserts the turn record in a savepoint (two
#: more, see statecore/store/sql/_turn_records.py). On PostgreSQL, once the process committed
#: the session's previous turn, the whole commit is one statement without a locked read
#: (statecore/store/sql/_turn_commit.py): two statements per turn.
MAX_STATEMENTS_PER_TURN = {"sqlite": 10, "postgresql": 2, "mysql": 14}


@pytest.fixture(params=DIALECTS)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SqlStateStore]:
    async with fresh_database(request.param, "cost") as url:
        await upgrade_database(url)
        opened = await SqlStateStore.connect(url)
        try:
            yield opened
        finally:
            await opened.close()


class Transactions:
    """The statements the store sends, grouped by transaction (BEGIN or the first statement
    after a COMMIT starts one)."""

    def __init__(self, store: SqlStateStore) -> None:
        self.groups: list[list[str]] = []
        self._open = False
        event.listen(store.engine.sync_engine, "before_cursor_execute", self._statement)
        event.listen(store.engine.sync_engine, "commit", self._end)
        event.listen(store.engine.sync_engine, "rollback", self._end)

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("BEGIN"):
            return
        if not self._open:
            self.groups.append([])
            self._open = True
        self.groups[-1].append(" ".join(statement.split()))

    def _end(self, _conn: Any) -> None:
        self._open = False


async def _turn(activities: TurnActivities, n: int) -> GenerateResult:
    message = Message(role="user", content=f"turn {n}: what should we do next about the plan?")
    commit = CommitTurnInput(ref=REF, turn_id=f"t{n}", turn=n, messages=[message])
    request = GenerateInput(ref=REF, turn_id=f"t{n}", pending=[message], commit=commit)
    return await ActivityEnvironment().run(activities.generate, request)


async def test_a_turn_costs_the_same_statements_at_any_length(store: SqlStateStore) -> None:
    resources = WorkerResources(models={"default": OfflineModel()})
    resources.attach(store)
    activities = TurnActivities(resources)
    seen: dict[int, list[list[str]]] = {}
    for n in range(1, 41):
        log = Transactions(store) if n in (5, 40) else None
        result = await _turn(activities, n)
        assert result.commit is not None and not result.commit.duplicate
        # The model reports the prompt as the context assembly counted it.
        assert result.usage.prompt_tokens == result.context_tokens
        if log is not None:
            seen[n] = log.groups
            event.remove(store.engine.sync_engine, "before_cursor_execute", log._statement)
            event.remove(store.engine.sync_engine, "commit", log._end)
            event.remove(store.engine.sync_engine, "rollback", log._end)
    early, late = seen[5], seen[40]
    assert len(late) == 2, late  # the context read, then the commit
    one_statement = store.dialect == "postgresql"
    # The turn's record and whether there are hints are read with the header; on a server
    # database the window's new rows too, in one statement (the previous turn's read left
    # the window cached), and on SQLite, where statements are no round trips, on their own.
    for read in (early[0], late[0]):
        assert "statecore_turn_records" in read[0] and "statecore_hints" in read[0]
        if store.dialect == "sqlite":
            assert len(read) == 2 and "statecore_window_rows" not in read[0], read
        else:
            assert len(read) == 1 and "statecore_window_rows" in read[0], read
    for transaction in late:
        headers = [s for s in transaction if s.startswith("SELECT statecore_sessions.")]
        assert len(headers) == (0 if transaction is late[1] and one_statement else 1), transaction
    if one_statement:
        # The commit: the header's UPDATE checked against the memo's version, the append
        # and the last writes, all in one statement.
        (commit,) = late[1]
        assert "header AS (UPDATE statecore_sessions" in commit, commit
        assert "CAST(statecore_sessions.xmin AS TEXT) =" in commit, commit
    # The window's boundary query joins once the log outgrows the budget; otherwise equal.
    assert [s for s in late[1]] == [s for s in early[1]]
    assert sum(len(t) for t in late) <= MAX_STATEMENTS_PER_TURN[store.dialect], late


#: A state-only turn's commit (one message and one KV put, ``commit_turn``): the header with
#: the turn's record, its hints flag and (SQLite) whether the turn has messages; the insert;
#: the counters' UPDATE, which returns the window's first message; the KV put; the turn
#: record, the latest turn and the change feed (see MAX_STATEMENTS_PER_TURN). PostgreSQL
#: locks the header, learning again whether the turn has messages (its first read held no
#: lock), and sends the insert with the counters and the last four writes as one statement.
STATE_COMMIT_STATEMENTS = {"sqlite": 8, "postgresql": 5, "mysql": 14}


async def test_a_state_only_commit_costs_a_fixed_set_of_statements(
    store: SqlStateStore,
) -> None:
    resources = WorkerResources(models={"default": OfflineModel()})
    resources.attach(store)
    activities = TurnActivities(resources)
    counted: list[list[str]] = []
    for n in range(1, 6):
        log = Transactions(store) if n == 5 else None
        message = Message(role="user", content=f"turn {n}: noted")
        put = KVOp(op="put", bucket="notes", key="last", value={"turn": n})
        commit = CommitTurnInput(ref=REF, turn_id=f"t{n}", turn=n, messages=[message], kv=[put])
        done = await ActivityEnvironment().run(activities.commit_turn, commit)
        assert not done.duplicate and done.last_seq == n and done.window_tokens > 0
        if log is not None:
            counted = log.groups
    assert len(counted) == 1, counted  # one transaction
    assert len(counted[0]) == STATE_COMMIT_STATEMENTS[store.dialect], counted[0]


def _message_scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes of an EXPLAIN (FORMAT JSON) plan that read ``statecore_messages``."""
    found = [plan] if plan.get("Relation Name") == "statecore_messages" else []
    for child in plan.get("Plans", []):
        found += _message_scans(child)
    return found


@pytest.mark.postgres
async def test_a_turn_seeks_its_messages_in_tables_never_analyzed() -> None:
    """Without statistics (a table autovacuum has not analyzed yet, a server without
    autovacuum) PostgreSQL plans by the statements' shape alone. Every read a turn sends,
    and an append's lookup of the turn's stored messages, reads only the rows it needs: none
    filters the session's other messages, however long its log (600 messages here)."""
    async with fresh_database("postgresql", "plans") as url:
        await upgrade_database(url)
        store = await SqlStateStore.connect(url)
        try:
            resources = WorkerResources(models={"default": OfflineModel()})
            resources.attach(store)
            activities = TurnActivities(resources)
            seed = [Message(role="user", content=f"earlier message {i}") for i in range(600)]
            async with store.transaction() as tx:
                await tx.sessions.ensure(REF)
                await tx.conversation.append(REF, "seed", seed)
            for n in range(1, 4):
                await _turn(activities, n)

            async def work() -> None:
                assert not (await _turn(activities, 4)).commit.duplicate  # type: ignore[union-attr]
                assert (await _turn(activities, 4)).commit.duplicate  # type: ignore[union-attr]
                async with store.transaction() as tx:  # a plain append looks the turn up
                    await tx.conversation.append(REF, "extra", [Message(role="user", content="x")])

            sent = await StatementLog(store).during(work)
            reads = [(s, p) for s, p in sent if s.lstrip().upper().startswith("SELECT")]
            assert len(reads) >= 4, sent
            async with store.engine.connect() as conn:
                for statement, parameters in reads:
                    explained = await conn.exec_driver_sql(
                        f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters
                    )
                    plan = explained.scalar_one()[0]["Plan"]  # JSON, decoded by the driver
                    for scan in _message_scans(plan):
                        assert scan.get("Rows Removed by Filter", 0) == 0, (statement, scan)
                        assert scan["Actual Rows"] * scan["Actual Loops"] <= 10, (statement, scan)
                await conn.rollback()  # EXPLAIN ANALYZE ran the locking reads
        finally:
            await store.close()
