"""What the SQL backend promises beyond the shared contract: appends and the token window
cost the same at any log length (index seeks only), racing writers on separate engines never
collide, delete leaves no row behind, and dialect limits surface as typed errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import func, select, text

from statecore.core._errors import StateTooLargeError
from statecore.core._models import KVScope, Message, SessionRef, ToolCall
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from statecore.store.sql._schema import metadata
from tests.dbs import fresh_database
from tests.statement_log import StatementLog

DIALECTS = [
    pytest.param("sqlite"),
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mariadb),
]
REF = SessionRef(namespace="sql", agent_id="agent", session_id="s1")


@pytest.fixture(scope="module", params=DIALECTS)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "sqlb") as database_url:
        await upgrade_database(database_url)
        yield database_url


@pytest.fixture
async def store(url: str) -> AsyncIterator[SqlStateStore]:
    opened = await SqlStateStore.connect(url)
    async with opened.transaction() as tx:
        await tx.sessions.delete_namespace("sql")
    try:
        yield opened
    finally:
        await opened.close()


def _turn(n: int, words: int = 3) -> list[Message]:
    return [Message(role="user", content=" ".join(["word"] * words)) for _ in range(n)]


async def test_append_and_tail_issue_the_same_statements_at_any_log_length(
    store: SqlStateStore,
) -> None:
    log = StatementLog(store)

    async def append(turn: str) -> None:
        async with store.transaction() as tx:
            await tx.conversation.append(REF, turn, _turn(2))

    async def tail() -> None:
        async with store.transaction() as tx:
            await tx.conversation.tail(REF, max_tokens=50, max_messages=20)

    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        await tx.conversation.append(REF, "seed", _turn(10))
    short_append = await log.during(lambda: append("short"))
    short_tail = await log.during(tail)

    async with store.transaction() as tx:
        await tx.conversation.append(REF, "bulk", _turn(3000))
    long_append = await log.during(lambda: append("long"))
    long_tail = await log.during(tail)

    assert [s for s, _ in short_append] == [s for s, _ in long_append]
    assert [s for s, _ in short_tail] == [s for s, _ in long_tail]
    # Session row, existing indexes of the turn, insert, counters (on PostgreSQL the insert
    # rides in the counters' UPDATE), then the append's change-feed event (one statement on
    # PostgreSQL, two on SQLite, three on MariaDB); then session, the window's boundary (the
    # budget binds at both lengths) and the window.
    feed = {"postgresql": 1, "sqlite": 2, "mysql": 3}[store.dialect]
    assert len(long_append) == (3 if store.dialect == "postgresql" else 4) + feed
    assert len(long_tail) == 3
    assert not any("count(" in s.lower() for s, _ in long_append + long_tail)


async def test_an_append_stores_every_column_as_given(store: SqlStateStore) -> None:
    """Every column of an append comes back as it went in, on every database (on PostgreSQL
    the rows travel as one array per column in the header's UPDATE), in one append and in
    the next, whose log continues where the first left off."""
    calls = [ToolCall(id="call-1", name="lookup", arguments='{"q": "\u00e9t\u00e9"}')]
    first = [
        Message(role="system", content="be brief"),
        Message(role="user", content="caf\u00e9 \u4e2d\u6587 \U0001f600 'quoted' \\ {}"),
        Message(role="assistant", content="", tool_calls=calls, metadata={"k": [1, None]}),
        Message(role="tool", content="42", name="lookup", tool_call_id="call-1"),
    ]
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        stored = await tx.conversation.append(REF, "every-column", first)
        stored += await tx.conversation.append(REF, "next", [Message(role="user", content="x")])
    async with store.transaction(read_only=True) as tx:
        assert await tx.conversation.messages(REF) == stored
        info = await tx.sessions.get(REF)
    assert [m.seq for m in stored] == [1, 2, 3, 4, 5]
    assert [m.index for m in stored] == [0, 1, 2, 3, 0]
    assert info is not None and info.last_seq == 5 and info.message_count == 5
    assert info.token_total == stored[-1].cumulative_tokens == sum(m.tokens for m in stored)


async def test_log_queries_are_index_seeks_on_sqlite(tmp_path: Any) -> None:
    """SQLite's planner shows every statement append/tail/turn_messages runs as a SEARCH on
    an index, never a SCAN of the messages table."""
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'plan.db'}"
    await upgrade_database(database_url)
    store = await SqlStateStore.connect(database_url)
    try:
        async with store.transaction() as tx:
            await tx.sessions.ensure(REF)
            await tx.conversation.append(REF, "seed", _turn(50))
        log = StatementLog(store)

        async def work() -> None:
            async with store.transaction() as tx:
                await tx.conversation.append(REF, "t1", _turn(2))
                await tx.conversation.tail(REF, max_tokens=40)
                await tx.conversation.turn_messages(REF, "seed")
                await tx.conversation.messages(REF, from_seq=10, to_seq=20)

        statements = await log.during(work)
        plans: list[str] = []
        async with store.engine.connect() as conn:
            for statement, params in statements:
                if statement.lstrip().upper().startswith(("SELECT", "UPDATE")):
                    rows = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
                    plans.extend(row[-1] for row in rows)
    finally:
        await store.close()
    assert plans
    scans = [p for p in plans if p.startswith("SCAN") and "messages" in p]
    assert scans == [], plans


async def test_the_token_window_does_the_same_work_at_any_log_length_on_sqlite(
    tmp_path: Any,
) -> None:
    """EXPLAIN QUERY PLAN reads "SEARCH ... (session_pk=? AND seq>?)" both for a seek to the
    window and for a seek to the window start that then filters every later row; counting
    SQLite's virtual machine instructions while ``tail`` runs tells the two apart."""
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'work.db'}"
    await upgrade_database(database_url)
    # One pooled connection, so the progress handler set on it sees every statement.
    store = await SqlStateStore.connect(database_url, pool_size=1, max_overflow=0)
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0  # carry on

    async def tail_instructions() -> int:
        nonlocal steps
        steps = 0
        async with store.transaction() as tx:
            window = await tx.conversation.tail(REF, max_tokens=50)
        assert 0 < len(window) < 10
        return steps

    try:
        async with store.engine.connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            await driver.set_progress_handler(tick, 1)
        async with store.transaction() as tx:
            await tx.sessions.ensure(REF)
            await tx.conversation.append(REF, "seed", _turn(10))
        short = await tail_instructions()
        async with store.transaction() as tx:
            await tx.conversation.append(REF, "bulk", _turn(3000))
        long = await tail_instructions()
    finally:
        await store.close()
    assert long < 2 * short, (short, long)


async def test_racing_ensures_and_appends_from_separate_engines(url: str) -> None:
    stores = [await SqlStateStore.connect(url) for _ in range(5)]
    ref = SessionRef(namespace="race", agent_id="agent", session_id="shared")
    start = asyncio.Event()

    async def turn(store: SqlStateStore, n: int) -> None:
        await start.wait()
        for i in range(4):
            async with store.transaction() as tx:
                await tx.sessions.ensure(ref)
                await tx.conversation.append(ref, f"w{n}-t{i}", _turn(2))

    try:
        racers = [asyncio.create_task(turn(s, n)) for n, s in enumerate(stores)]
        start.set()
        await asyncio.gather(*racers)
        async with stores[0].transaction() as tx:
            info = await tx.sessions.get(ref)
            log = await tx.conversation.messages(ref)
            await tx.sessions.delete(ref)
    finally:
        for store in stores:
            await store.close()
    assert info is not None and info.message_count == len(log) == 5 * 4 * 2
    assert [m.seq for m in log] == list(range(1, len(log) + 1))
    running = 0
    for message in log:
        running += message.tokens
        assert message.cumulative_tokens == running
    assert info.token_total == running


async def test_delete_leaves_no_row_of_the_session_behind(store: SqlStateStore) -> None:
    other = SessionRef(namespace="sql", agent_id="agent", session_id="other")
    for ref in (REF, other):
        async with store.transaction() as tx:
            await tx.sessions.ensure(ref)
            await tx.conversation.append(ref, "t", _turn(3))
            await tx.conversation.add_hint(ref, "hint")
            await tx.flow.save(ref, "f", "step", {"k": 1})
            await tx.orchestration.advance_sequence(ref)
            await tx.kv.put(ref.kv_scope, "b", "k", 1)
            await tx.state.create(ref.namespace, ref.session_id, ref.agent_id, {"s": 1})
    before = await _row_counts(store)
    async with store.transaction() as tx:
        assert await tx.sessions.delete(REF) is True
    after = await _row_counts(store)
    # Exactly one session's rows went: the other session's are all still there (and tables
    # that hold no session rows are untouched: the LangGraph checkpoints, and the change
    # feed, which gained the deletion's event).
    gone = {table: before[table] - after[table] for table in before}
    assert {table: count for table, count in gone.items() if count} == {
        "statecore_events": -1,
        "statecore_sessions": 1,
        "statecore_messages": 3,
        "statecore_hints": 1,
        "statecore_flow_checkpoints": 1,
        "statecore_orchestration_states": 1,
        "statecore_kv_entries": 1,
        "statecore_scoped_states": 1,
    }


async def _row_counts(store: SqlStateStore) -> dict[str, int]:
    async with store.engine.connect() as conn:
        return {
            name: int(await conn.scalar(select(func.count()).select_from(table)) or 0)
            for name, table in metadata.tables.items()
        }


async def test_timestamps_from_any_timezone_come_back_as_the_same_utc_instant(url: str) -> None:
    local = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    store = await SqlStateStore.connect(url, clock=lambda: local)
    try:
        async with store.transaction() as tx:
            await tx.sessions.ensure(REF)
            await tx.kv.put(KVScope(namespace="sql"), "b", "k", 1, ttl_seconds=1.5)
        async with store.transaction() as tx:
            info = await tx.sessions.get(REF)
            entry = await tx.kv.get(KVScope(namespace="sql"), "b", "k")
            await tx.sessions.delete_namespace("sql")
    finally:
        await store.close()
    assert info is not None and entry is not None
    assert info.created_at == local and info.created_at.tzinfo == UTC
    assert entry.expires_at == local + timedelta(seconds=1.5)


@pytest.mark.mariadb
async def test_document_over_the_servers_packet_limit_is_a_typed_error(tmp_path: Any) -> None:
    async with fresh_database("mysql", "packet") as database_url:
        await upgrade_database(database_url)
        store = await SqlStateStore.connect(database_url)
        try:
            async with store.transaction() as tx:
                await tx.sessions.ensure(REF)
            # Stand in for a server left at a small max_allowed_packet (below the store's own
            # 1 MiB document limit, so the packet is what refuses).
            store._max_packet_bytes = 256 * 1024
            big = {"blob": "x" * (512 * 1024)}
            with pytest.raises(StateTooLargeError, match="max_allowed_packet"):
                async with store.transaction() as tx:
                    await tx.state.create("sql", "task", "agent", big)
            with pytest.raises(StateTooLargeError, match="max_allowed_packet"):
                async with store.transaction() as tx:
                    await tx.flow.save(REF, "f", "step", big)
            async with store.transaction() as tx:
                assert await tx.state.get("sql", "task", "agent") is None
                assert await tx.flow.count(REF) == 0
        finally:
            await store.close()


async def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path: Any) -> None:
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'wal.db'}"
    await upgrade_database(database_url)
    store = await SqlStateStore.connect(database_url)
    try:
        async with store.engine.connect() as conn:
            journal = await conn.scalar(text("PRAGMA journal_mode"))
            foreign_keys = await conn.scalar(text("PRAGMA foreign_keys"))
    finally:
        await store.close()
    assert (journal, foreign_keys) == ("wal", 1)


async def test_in_memory_sqlite_is_migrated_on_connect_and_serialises_transactions() -> None:
    store = await SqlStateStore.connect("sqlite+aiosqlite://")

    async def turn(n: int) -> None:
        async with store.transaction() as tx:
            await tx.sessions.ensure(REF)
            await tx.conversation.append(REF, f"t{n}", _turn(1))

    try:
        await asyncio.gather(*(turn(n) for n in range(8)))
        async with store.transaction() as tx:
            info = await tx.sessions.get(REF)
    finally:
        await store.close()
    assert info is not None and info.last_seq == info.message_count == 8


def _session_statements(statements: list[tuple[str, Any]]) -> tuple[int, int]:
    """(SELECTs of the sessions table, UPDATEs of it) among ``statements``; an UPDATE may
    carry an append's messages in front of it (PostgreSQL)."""
    reads = sum(1 for s, _ in statements if s.lstrip().startswith("SELECT statecore_sessions."))
    writes = sum(1 for s, _ in statements if "UPDATE statecore_sessions SET" in " ".join(s.split()))
    return reads, writes


async def test_a_transaction_reads_a_session_header_once_and_keeps_it_current(
    store: SqlStateStore,
) -> None:
    """Every module of a turn needs the session's header row (log counters, summary, window
    start, idle clock); one read serves the whole transaction, and what the transaction
    writes to the row is what later reads in it return."""
    log = StatementLog(store)
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        await tx.conversation.append(REF, "seed", _turn(3))
    seen: dict[str, Any] = {}

    async def turn() -> None:
        async with store.transaction() as tx:
            seen["before"] = await tx.sessions.get(REF)
            await tx.conversation.summary(REF)
            await tx.conversation.hints(REF)
            await tx.conversation.tail(REF, max_tokens=1000)
            await tx.sessions.ensure(REF)
            await tx.conversation.append(REF, "next", _turn(2))
            await tx.orchestration.add_token_usage(REF, 10, 5)
            seen["after"] = await tx.sessions.get(REF)

    statements = await log.during(turn)
    reads, writes = _session_statements(statements)
    # One plain read, then one under the row lock where the dialect has row locks (SQLite's
    # BEGIN IMMEDIATE already holds the database); the idle clock moves with the counters,
    # in one UPDATE.
    assert reads == (1 if store.dialect == "sqlite" else 2), statements
    assert writes == 1, statements
    before, after = seen["before"], seen["after"]
    assert (before.last_seq, before.message_count) == (3, 3)
    assert (after.last_seq, after.message_count) == (5, 5)
    assert after.token_total > before.token_total
    async with store.transaction() as tx:
        assert await tx.sessions.get(REF) == after


@pytest.mark.parametrize("url", DIALECTS[1:], indirect=True)
async def test_a_locked_read_sees_a_commit_made_after_an_unlocked_one(url: str) -> None:
    """An unlocked read of the header is not taken for a locked one: an append after it
    reads the row again under the lock, so it continues the log another transaction just
    extended instead of reusing seqs."""
    first, second = await SqlStateStore.connect(url), await SqlStateStore.connect(url)
    ref = SessionRef(namespace="sql", agent_id="agent", session_id="unlocked-then-locked")
    try:
        async with first.transaction() as tx:
            await tx.sessions.ensure(ref)
            await tx.conversation.append(ref, "t1", _turn(2))
        async with first.transaction() as tx:
            early = await tx.sessions.get(ref)
            async with second.transaction() as other:
                await other.conversation.append(ref, "t2", _turn(2))
            stored = await tx.conversation.append(ref, "t3", _turn(2))
        async with first.transaction() as tx:
            log = await tx.conversation.messages(ref)
            await tx.sessions.delete(ref)
    finally:
        await first.close()
        await second.close()
    assert early is not None and early.last_seq == 2
    assert [m.seq for m in stored] == [5, 6]
    assert [(m.seq, m.turn_id) for m in log] == [
        (1, "t1"),
        (2, "t1"),
        (3, "t2"),
        (4, "t2"),
        (5, "t3"),
        (6, "t3"),
    ]


async def test_sqlite_reads_run_beside_a_writer_and_writers_queue_in_order(
    tmp_path: Any,
) -> None:
    """A read-only transaction on SQLite takes no write lock: it reads its snapshot while a
    writer holds the database. Writers of one store queue in the order they asked, and each
    starts as soon as the one before commits (no busy polling)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'queue.db'}"
    await upgrade_database(url)
    store = await SqlStateStore.connect(url)
    ref = SessionRef(namespace="sql", agent_id="agent", session_id="queue")
    order: list[str] = []
    holding, release = asyncio.Event(), asyncio.Event()

    async def long_writer() -> None:
        async with store.transaction() as tx:
            await tx.conversation.append(ref, "held", _turn(1))
            holding.set()
            await release.wait()
            order.append("held")

    async def writer(name: str) -> None:
        async with store.transaction() as tx:
            await tx.conversation.append(ref, name, _turn(1))
            order.append(name)

    try:
        async with store.transaction() as tx:
            await tx.sessions.ensure(ref)
        first = asyncio.create_task(long_writer())
        await holding.wait()
        queued = []
        for name in ("w1", "w2", "w3"):
            queued.append(asyncio.create_task(writer(name)))
            await asyncio.sleep(0.01)
        async with store.transaction(read_only=True) as tx:
            info = await tx.sessions.get(ref)
        assert info is not None and info.message_count == 0  # the writer has not committed
        assert order == []
        release.set()
        await asyncio.wait_for(asyncio.gather(first, *queued), timeout=10)
        async with store.transaction(read_only=True) as tx:
            log = await tx.conversation.messages(ref)
    finally:
        await store.close()
    assert order == ["held", "w1", "w2", "w3"]
    assert [m.turn_id for m in log] == order
