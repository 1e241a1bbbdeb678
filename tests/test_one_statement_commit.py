"""PostgreSQL: a chat turn of a session whose previous turn this process committed commits in
one statement (statecore/store/sql/_turn_commit.py), and writes exactly what the
usual commit writes, whatever other workers did to the session in between."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool
from temporalio.testing import ActivityEnvironment

from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import CommitTurnInput, GenerateInput, GenerateResult
from statecore.core._models import Message, SessionRef
from statecore.llm._offline import OfflineModel
from statecore.store import StoreTransaction, run_transaction
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from statecore.store.sql import _turn_commit as turn_commit
from tests.dbs import fresh_database
from tests.sql_rows import all_rows

pytestmark = pytest.mark.postgres

REF = SessionRef(namespace="one", agent_id="agent", session_id="s1")
START = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves: both runs of a scenario stamp the same times."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def tick(self) -> None:
        self.now += timedelta(seconds=1)


@pytest.fixture
async def urls() -> AsyncIterator[tuple[str, str]]:
    async with (
        fresh_database("postgresql", "one") as first,
        fresh_database("postgresql", "usual") as second,
    ):
        for url in (first, second):
            await upgrade_database(url)
        yield first, second


class Worker:
    """A store and the turn activities of one worker process."""

    def __init__(self, store: SqlStateStore) -> None:
        self.store = store
        resources = WorkerResources(models={"default": OfflineModel()})
        resources.attach(store)
        self.activities = TurnActivities(resources)

    async def turn(self, turn_id: str, n: int, ref: SessionRef = REF) -> GenerateResult:
        message = Message(role="user", content=f"{turn_id}: what comes next, step {n}?")
        commit = CommitTurnInput(ref=ref, turn_id=turn_id, turn=n, messages=[message])
        request = GenerateInput(ref=ref, turn_id=turn_id, pending=[message], commit=commit)
        return await ActivityEnvironment().run(self.activities.generate, request)

    async def run(self, work: Callable[[StoreTransaction], Awaitable[Any]]) -> Any:
        return await run_transaction(self.store, work)


def _counting_sends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sent: list[int] = []
    send = turn_commit._send_whole_commit

    async def counted(*args: Any, **kwargs: Any) -> None:
        await send(*args, **kwargs)
        sent.append(1)

    monkeypatch.setattr(turn_commit, "_send_whole_commit", counted)
    return sent


Step = Callable[["Worker", str], Awaitable[Any]]

#: What another worker (B) does to the session between worker A's turns: everything that
#: moves the header (a turn of its own, a retraction, a new window start and summary, a
#: deletion, an orchestration reset) and some writes that do not (a hint, a KV put).
OTHER_WORKER: list[Step] = [
    lambda b, _url: b.turn("b-1", 3),
    lambda b, _url: b.run(lambda tx: tx.conversation.retract_last(REF)),
    lambda b, _url: b.run(lambda tx: tx.conversation.set_window_start(REF, 5)),
    lambda b, _url: b.run(lambda tx: tx.conversation.set_summary(REF, "so far", 4)),
    lambda b, _url: b.run(lambda tx: tx.conversation.add_hint(REF, "be brief")),
    lambda b, _url: b.run(lambda tx: tx.kv.put(REF.kv_scope, "notes", "k", 1)),
    lambda b, _url: b.run(lambda tx: tx.orchestration.reset(REF)),
    lambda b, _url: b.run(lambda tx: tx.sessions.delete(REF)),
]

_SESSION_PK = "(SELECT id FROM statecore_sessions WHERE session_id = 's1')"
#: Changes the header does not show, as a worker of an older release or an operator's SQL
#: could make them: each must still send A's next commit the usual way.
UNSEEN_IN_THE_HEADER = [
    # The window's first message taken back: the window's tokens change.
    "UPDATE statecore_messages SET retracted_at = '2026-11-27 12:00:30+00' "
    f"WHERE session_pk = {_SESSION_PK} AND seq = 1",
    # The session's usage totals gone: the usual commit creates them again.
    f"DELETE FROM statecore_orchestration_states WHERE session_pk = {_SESSION_PK}",
]


def _sql(statement: str) -> Step:
    async def run(_b: Worker, url: str) -> None:
        engine = create_async_engine(url, poolclass=NullPool)
        try:
            async with engine.begin() as conn:
                await conn.execute(text(statement))
        finally:
            await engine.dispose()

    return run


async def _scenario(
    url: str, one_statement: bool, steps: list[Step]
) -> tuple[list[Any], dict[str, Any]]:
    """Worker A runs two chat turns, then two more after each step. Returns A's commit
    results and every row at the end."""
    clock = Clock()
    a_store = await SqlStateStore.connect(url, clock=clock)
    b_store = await SqlStateStore.connect(url, clock=clock)
    if not one_statement:
        a_store._memos = None  # the usual commit, every time
    a, b = Worker(a_store), Worker(b_store)
    results: list[Any] = []
    n = 0

    async def a_turns(count: int) -> None:
        nonlocal n
        for _ in range(count):
            n += 1
            clock.tick()
            done = await a.turn(f"a-{n}", n)
            assert done.commit is not None and not done.commit.duplicate
            results.append((done.message.content, done.commit.model_dump()))

    try:
        await a_turns(2)
        for step in steps:
            clock.tick()
            await step(b, url)
            await a_turns(2)
    finally:
        await a_store.close()
        await b_store.close()
    return results, await all_rows(url)


@pytest.mark.parametrize(
    ("steps", "restarted"),
    [
        pytest.param(OTHER_WORKER, 6, id="another-worker"),
        pytest.param([_sql(s) for s in UNSEEN_IN_THE_HEADER], 2, id="unseen-in-the-header"),
    ],
)
async def test_every_commit_writes_what_the_usual_commit_writes(
    urls: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    steps: list[Step],
    restarted: int,
) -> None:
    sent = _counting_sends(monkeypatch)
    caplog.set_level(logging.DEBUG, logger="statecore.store")
    one, one_rows = await _scenario(urls[0], True, steps)
    sent_one = len(sent)
    restarts = [r.getMessage() for r in caplog.records if "runs again at once" in r.getMessage()]
    usual, usual_rows = await _scenario(urls[1], False, steps)
    assert len(sent) == sent_one  # the usual run sent none
    # The same replies, counters, window tokens and records, and every row the same.
    assert one == usual
    assert one_rows == usual_rows
    # A's first turn had no memo; every step but the hint and the KV put (which leave the
    # header as it was) sent A's next commit back the usual way; every other turn of A's
    # went as one statement.
    assert len(restarts) == restarted, restarts
    assert sent_one == len(one) - 1 - restarted, (sent_one, restarts)
    assert len(one) == 2 + 2 * len(steps)


async def test_a_chat_turn_sends_no_begin_or_commit_once_the_process_committed_one(
    urls: tuple[str, str],
) -> None:
    store = await SqlStateStore.connect(urls[0])
    simple: list[str] = []

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver's simple-protocol statements (BEGIN, COMMIT, ROLLBACK); a listener on
        # statements would send every statement through SQLAlchemy instead.
        dbapi_connection.driver_connection.add_query_logger(lambda q: simple.append(q.query))

    event.listen(store.engine.sync_engine, "connect", on_connect)
    await store.engine.dispose()  # connections from here on carry the logger
    worker = Worker(store)
    try:
        await worker.turn("t1", 1)  # no memo yet: the usual commit
        assert [q for q in simple if q.startswith(("BEGIN", "COMMIT"))], simple
        for n in range(2, 6):
            simple.clear()
            done = await worker.turn(f"t{n}", n)
            assert done.commit is not None and (done.commit.last_seq, done.commit.turn) == (
                2 * n,
                n,
            )
            assert simple == [], simple
        async with store.transaction() as tx:
            log = await tx.conversation.messages(REF)
            records = await tx.turns.count(REF)
    finally:
        await store.close()
    assert [m.seq for m in log] == list(range(1, 11)) and records == 5


async def test_two_workers_committing_turns_of_one_session_at_once_lose_nothing(
    urls: tuple[str, str],
) -> None:
    """Each worker's memo goes stale with every turn the other commits: its next commit
    fails its check and runs the usual way, waiting for the header's lock."""
    stores = [await SqlStateStore.connect(urls[0]) for _ in range(2)]
    workers = [Worker(s) for s in stores]
    turns = 12
    try:
        await workers[0].turn("w0-0", 0)

        async def run(index: int) -> None:
            for n in range(1, turns + 1):
                await workers[index].turn(f"w{index}-{n}", n)

        await asyncio.gather(run(0), run(1))
        async with stores[0].transaction() as tx:
            log = await tx.conversation.messages(REF)
            info = await tx.sessions.get(REF)
            records = await tx.turns.count(REF)
            usage = await tx.orchestration.get(REF)
            events = await tx.events.read(REF.namespace, after=0, limit=1000)
    finally:
        for store in stores:
            await store.close()
    expected = 2 * (1 + 2 * turns)
    assert [m.seq for m in log] == list(range(1, expected + 1))
    # Each message once, the running token total without a gap.
    assert len({(m.turn_id, m.index) for m in log}) == expected
    total = 0
    for m in log:
        total += m.tokens
        assert m.cumulative_tokens == total
    assert info is not None and (info.last_seq, info.token_total) == (expected, total)
    assert records == 1 + 2 * turns
    assert usage is not None and usage.cumulative_token_usage.total_tokens > 0
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len(events) == 1 + 2 * turns


async def test_racing_attempts_of_a_turn_in_one_process_commit_it_once(
    urls: tuple[str, str],
) -> None:
    """A retried model call racing the original in the same worker: one attempt takes the
    memo and the one statement, the others the usual commit; one commit lands."""
    store = await SqlStateStore.connect(urls[0])
    worker = Worker(store)
    try:
        await worker.turn("t1", 1)
        results = await asyncio.gather(*(worker.turn("t2", 2) for _ in range(6)))
        again = await worker.turn("t2", 2)
        async with store.transaction() as tx:
            log = await tx.conversation.messages(REF)
    finally:
        await store.close()
    commits = [r.commit for r in [*results, again]]
    assert all(c is not None for c in commits)
    assert [c.duplicate for c in commits if c is not None].count(False) == 1
    assert len({r.message.content for r in results}) == 1
    assert [(m.seq, m.turn_id) for m in log] == [(1, "t1"), (2, "t1"), (3, "t2"), (4, "t2")]


async def test_a_retraction_that_holds_the_header_while_the_commit_waits_sends_it_back(
    urls: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """The one statement reads the log as it stood when it began, then waits for the
    header's row lock. A retraction holding that lock changes the window under it: it moves
    the header too, so the statement's check on the header's version fails once it gets the
    lock, and the commit runs the usual way, reading the log after the retraction."""
    caplog.set_level(logging.DEBUG, logger="statecore.store")
    a_store = await SqlStateStore.connect(urls[0])
    b_store = await SqlStateStore.connect(urls[0])
    a, b = Worker(a_store), Worker(b_store)
    try:
        await a.turn("t1", 1)
        await a.turn("t2", 2)
        # The window starts after the log: A's next turn's messages open it.
        await b.run(lambda tx: tx.conversation.set_window_start(REF, 5))
        await a.turn("t3", 3)  # messages 5 and 6; A's memo knows the window's base
        caplog.clear()
        async with b_store.transaction() as tx:
            # Both of t3's messages taken back: the window's first message is t4's now.
            await tx.conversation.retract_last(REF)
            await tx.conversation.retract_last(REF)
            turn = asyncio.create_task(a.turn("t4", 4))
            await _until_a_statement_waits_for_a_lock(urls[0])
        done = await asyncio.wait_for(turn, 30)
        async with a_store.transaction() as tx:
            log = await tx.conversation.messages(REF)
    finally:
        await a_store.close()
        await b_store.close()
    assert done.commit is not None and not done.commit.duplicate
    t4 = [m for m in log if m.turn_id == "t4"]
    assert [m.seq for m in t4] == [7, 8]
    assert done.commit.window_tokens == sum(m.tokens for m in t4)
    restarts = [r for r in caplog.records if "runs again at once" in r.getMessage()]
    assert len(restarts) == 1


#: Seconds a test waits for the one statement to queue behind the retraction's row lock.
LOCK_WAIT_LIMIT = 10.0


async def _until_a_statement_waits_for_a_lock(url: str) -> None:
    engine = create_async_engine(url, poolclass=NullPool)
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'"
    )
    try:
        async with asyncio.timeout(LOCK_WAIT_LIMIT):
            while True:
                async with engine.connect() as conn:
                    if (await conn.execute(query)).scalar_one():
                        return
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"no statement waited for a lock within {LOCK_WAIT_LIMIT} s") from None
    finally:
        await engine.dispose()
