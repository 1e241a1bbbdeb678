"""Conformance: the conversation log (ConversationStore) on every backend."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from statecore.core._errors import (
    AlreadyExistsError,
    InvalidInputError,
    InvalidLimitError,
    SessionNotFoundError,
)
from statecore.core._models import Message, SessionRef, StoredMessage
from statecore.core._tokens import TokenCounter
from statecore.store import StateStore
from tests.store.conftest import FakeClock
from tests.store.helpers import assistant, ensure, tool_exchange, user


async def _fill(store: StateStore, ref: SessionRef, turns: int) -> list[StoredMessage]:
    """``turns`` turns of one user and one assistant message each."""
    stored: list[StoredMessage] = []
    async with store.transaction() as tx:
        await tx.sessions.ensure(ref)
        for n in range(turns):
            stored += await tx.conversation.append(
                ref, f"turn-{n}", [user(f"question {n} " * (n + 1)), assistant(f"answer {n}")]
            )
    return stored


async def test_append_numbers_counts_and_stamps_messages(
    store: StateStore, ref: SessionRef, clock: FakeClock, token_counter: TokenCounter
) -> None:
    await ensure(store, ref)
    messages = [user("Hello, I'm Alice."), assistant("Hi Alice!"), *tool_exchange()]
    async with store.transaction() as tx:
        stored = await tx.conversation.append(ref, "turn-1", messages)

    assert [m.seq for m in stored] == [1, 2, 3, 4]
    assert [m.index for m in stored] == [0, 1, 2, 3]
    assert {m.turn_id for m in stored} == {"turn-1"}
    assert [m.tokens for m in stored] == [token_counter.count_message(m) for m in messages]
    running = 0
    for m in stored:
        running += m.tokens
        assert m.cumulative_tokens == running
        assert m.created_at == clock()
    # The stored content is the sent content, tool calls and metadata included.
    for sent, got in zip(messages, stored, strict=True):
        assert got.model_dump(include=set(Message.model_fields)) == sent.model_dump()

    async with store.transaction() as tx:
        info = await tx.sessions.get(ref)
        assert await tx.conversation.messages(ref) == stored
    assert info is not None
    assert (info.last_seq, info.message_count, info.token_total) == (4, 4, running)


async def test_seq_continues_across_turns_and_transactions(
    store: StateStore, ref: SessionRef
) -> None:
    first = await _fill(store, ref, 2)
    async with store.transaction() as tx:
        later = await tx.conversation.append(ref, "turn-9", [user("more")], start_index=3)
    assert [m.seq for m in first + later] == [1, 2, 3, 4, 5]
    assert later[0].index == 3
    assert later[0].cumulative_tokens == first[-1].cumulative_tokens + later[0].tokens


async def test_append_is_idempotent_on_turn_and_index(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        original = await tx.conversation.append(ref, "t1", [user("one"), assistant("two")])
    clock.advance(30)
    async with store.transaction() as tx:
        # A replayed turn (crashed worker) resends the same indexes, maybe with other text.
        again = await tx.conversation.append(
            ref, "t1", [user("one, reworded"), assistant("two"), assistant("three")]
        )
        info = await tx.sessions.get(ref)
    assert again[:2] == original
    assert again[2].seq == 3 and again[2].index == 2 and again[2].created_at == clock()
    assert info is not None and (info.last_seq, info.message_count) == (3, 3)

    async with store.transaction() as tx:
        replay = await tx.conversation.append(ref, "t1", [assistant("two")], start_index=1)
        assert replay == [original[1]]
        assert len(await tx.conversation.messages(ref)) == 3


async def test_an_append_after_the_turns_first_read_is_idempotent_too(
    store: StateStore, ref: SessionRef
) -> None:
    # A turn's commit reads its record first, and on SQLite learns from the same statement
    # whether the turn has messages, which the append then need not look up: it must still
    # find messages stored earlier, and those it writes itself.
    await ensure(store, ref)
    async with store.transaction() as tx:
        original = await tx.conversation.append(ref, "t1", [user("one"), assistant("two")])
    async with store.transaction() as tx:
        assert await tx.turns.get(ref, "t1") is None
        assert await tx.conversation.append(ref, "t1", [user("one")]) == original[:1]
    async with store.transaction() as tx:
        assert await tx.turns.get(ref, "t2") is None
        first = await tx.conversation.append(ref, "t2", [user("three")])
        both = await tx.conversation.append(ref, "t2", [user("three"), assistant("four")])
        info = await tx.sessions.get(ref)
    assert both[0] == first[0] and both[1].seq == 4
    assert info is not None and (info.last_seq, info.message_count) == (4, 4)
    async with store.transaction(read_only=True) as tx:
        assert [m.seq for m in await tx.conversation.messages(ref)] == [1, 2, 3, 4]


async def test_a_turns_begin_ensures_the_session_and_its_append_stays_idempotent(
    store: StateStore, ref: SessionRef
) -> None:
    # A commit begins with begin_turn, whose locked read may also learn that the turn has
    # no messages: the append must still find those stored earlier, and its own.
    async with store.transaction() as tx:
        info = await tx.begin_turn(ref, "t1")
        original = await tx.conversation.append(ref, "t1", [user("one"), assistant("two")])
    assert (info.ref, info.last_seq) == (ref, 0)
    async with store.transaction() as tx:
        info = await tx.begin_turn(ref, "t1")
        assert await tx.conversation.append(ref, "t1", [user("one")]) == original[:1]
        first = await tx.conversation.append(ref, "t2", [user("three")])
        both = await tx.conversation.append(ref, "t2", [user("three"), assistant("four")])
    assert info.last_seq == 2
    assert both[0] == first[0] and both[1].seq == 4
    async with store.transaction() as tx:
        await tx.begin_turn(ref, "t3")
        assert await tx.conversation.append(ref, "t2", [user("three")]) == first
    async with store.transaction(read_only=True) as tx:
        assert [m.seq for m in await tx.conversation.messages(ref)] == [1, 2, 3, 4]


async def test_a_turn_that_only_appends_commits_as_any_turn(
    store: StateStore, ref: SessionRef
) -> None:
    # messages_only lets a backend hold the turn's writes back until finish_turn
    # (PostgreSQL, once this store committed a turn of the session: one statement); what
    # lands is the same, and so is what the transaction reads in between.
    for n in (1, 2, 3):
        async with store.transaction() as tx:
            info = await tx.begin_turn(ref, f"t{n}", messages_only=True)
            assert info.last_seq == 2 * (n - 1)
            stored = await tx.conversation.append(ref, f"t{n}", [user(f"q{n}"), assistant(f"a{n}")])
            after = await tx.sessions.get(ref)
            assert after is not None and after.last_seq == 2 * n
            await tx.finish_turn(
                ref, f"t{n}", {"turn": n}, ("turn.meta", "latest", {"turn": n}), []
            )
        assert [m.seq for m in stored] == [2 * n - 1, 2 * n]
    async with store.transaction(read_only=True) as tx:
        log = await tx.conversation.messages(ref)
        records = [await tx.turns.get(ref, f"t{n}") for n in (1, 2, 3)]
        marker = await tx.kv.get(ref.kv_scope, "turn.meta", "latest")
    assert [(m.seq, m.turn_id) for m in log] == [(s, f"t{(s + 1) // 2}") for s in range(1, 7)]
    assert records == [{"turn": 1}, {"turn": 2}, {"turn": 3}]
    assert marker is not None and marker.value == {"turn": 3}


@pytest.mark.parametrize("flag", [None, 1, "yes"])
async def test_a_turns_begin_refuses_a_messages_only_that_is_not_a_bool(
    store: StateStore, ref: SessionRef, flag: object
) -> None:
    with pytest.raises(InvalidInputError):
        async with store.transaction() as tx:
            await tx.begin_turn(ref, "t1", messages_only=flag)  # type: ignore[arg-type]
    async with store.transaction(read_only=True) as tx:
        assert await tx.sessions.get(ref) is None


@pytest.mark.parametrize("turn_id", ["", "x" * 10_000, None, 7, "bad\x00id"])
async def test_a_turns_begin_refuses_a_bad_turn_id_and_creates_nothing(
    store: StateStore, ref: SessionRef, turn_id: object
) -> None:
    with pytest.raises(InvalidInputError):
        async with store.transaction() as tx:
            await tx.begin_turn(ref, turn_id)  # type: ignore[arg-type]
    async with store.transaction(read_only=True) as tx:
        assert await tx.sessions.get(ref) is None
    async with store.transaction() as tx:
        await tx.begin_turn(ref, "t1")
        assert [m.seq for m in await tx.conversation.append(ref, "t1", [user("ok")])] == [1]


async def test_a_turns_begin_that_waits_for_the_writer_of_its_messages_finds_them(
    store: StateStore, ref: SessionRef
) -> None:
    # PostgreSQL reads the turn's messages in the statement that waits for the header's
    # lock, from a snapshot older than the writer it waited for: that answer must not be
    # trusted, or the append would store the turn's messages a second time.
    if store.dialect != "postgresql":
        pytest.skip("only PostgreSQL reads other tables from a snapshot older than its lock")
    engine = store.engine  # type: ignore[attr-defined]
    await ensure(store, ref)
    written, release = asyncio.Event(), asyncio.Event()

    async def writer() -> list[StoredMessage]:
        async with store.transaction() as tx:
            stored = await tx.conversation.append(ref, "t1", [user("one"), assistant("two")])
            written.set()
            await asyncio.wait_for(release.wait(), 30)
        return stored

    async def retry() -> list[StoredMessage]:
        async with store.transaction() as tx:
            await tx.begin_turn(ref, "t1")
            return await tx.conversation.append(ref, "t1", [user("one"), assistant("two")])

    first = asyncio.create_task(writer())
    await asyncio.wait_for(written.wait(), 30)
    second = asyncio.create_task(retry())
    async with engine.connect() as conn:
        for _ in range(300):  # until the retry waits for the writer's lock (30 s at most)
            waiting = await conn.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                )
            )
            await conn.rollback()
            if waiting:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the retry never waited for the writer's lock")
    release.set()
    stored = await asyncio.wait_for(first, 30)
    assert await asyncio.wait_for(second, 30) == stored
    async with store.transaction(read_only=True) as tx:
        assert [m.seq for m in await tx.conversation.messages(ref)] == [1, 2]


async def test_empty_append_stores_nothing(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        assert await tx.conversation.append(ref, "t1", []) == []
        info = await tx.sessions.get(ref)
    assert info is not None and info.last_seq == 0


async def test_turn_messages_by_index(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.conversation.append(ref, "a", [assistant("a2")], start_index=2)
        await tx.conversation.append(ref, "b", [user("b0")])
        await tx.conversation.append(ref, "a", [user("a0"), assistant("a1")])
        turn = await tx.conversation.turn_messages(ref, "a")
        assert await tx.conversation.turn_messages(ref, "never") == []
    assert [(m.index, m.content) for m in turn] == [(0, "a0"), (1, "a1"), (2, "a2")]
    assert [m.seq for m in turn] == [3, 4, 1]


async def test_messages_by_seq_range_and_limit(store: StateStore, ref: SessionRef) -> None:
    stored = await _fill(store, ref, 5)  # seq 1..10
    async with store.transaction() as tx:
        conv = tx.conversation
        assert await conv.messages(ref) == stored
        assert await conv.messages(ref, from_seq=4) == stored[3:]
        assert await conv.messages(ref, to_seq=3) == stored[:3]
        assert await conv.messages(ref, from_seq=4, to_seq=7) == stored[3:7]
        assert await conv.messages(ref, from_seq=4, limit=2) == stored[3:5]
        assert await conv.messages(ref, from_seq=11) == []
        assert await conv.messages(ref, from_seq=7, to_seq=6) == []


async def test_tail_by_message_count_and_token_budget(store: StateStore, ref: SessionRef) -> None:
    stored = await _fill(store, ref, 4)  # 8 messages of different sizes
    last3 = stored[-3:]
    budget = sum(m.tokens for m in last3)
    async with store.transaction() as tx:
        conv = tx.conversation
        assert await conv.tail(ref) == stored
        assert await conv.tail(ref, max_messages=3) == last3
        assert await conv.tail(ref, max_messages=1000) == stored
        # The budget is honoured exactly: one token less drops the oldest of the three.
        assert await conv.tail(ref, max_tokens=budget) == last3
        assert await conv.tail(ref, max_tokens=budget - 1) == stored[-2:]
        assert await conv.tail(ref, max_tokens=budget, max_messages=2) == stored[-2:]
        # A newest message bigger than the budget leaves nothing that fits.
        assert await conv.tail(ref, max_tokens=stored[-1].tokens - 1) == []


async def test_tail_honours_the_window_start(store: StateStore, ref: SessionRef) -> None:
    stored = await _fill(store, ref, 4)
    async with store.transaction() as tx:
        await tx.conversation.set_window_start(ref, 6)
    async with store.transaction() as tx:
        conv = tx.conversation
        assert await conv.tail(ref) == stored[5:]
        assert await conv.tail(ref, max_tokens=10**6) == stored[5:]
        assert await conv.tail(ref, max_messages=10) == stored[5:]
        assert await conv.tail(ref, max_messages=2) == stored[6:]
        # Compaction never deletes: the full log is still there.
        assert await conv.messages(ref) == stored
        info = await tx.sessions.get(ref)
    assert info is not None and info.window_start_seq == 6


async def test_tail_of_an_empty_log(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        assert await tx.conversation.tail(ref, max_tokens=100, max_messages=5) == []


async def test_window_start_moves_only_forward_and_not_past_the_end(
    store: StateStore, ref: SessionRef
) -> None:
    await _fill(store, ref, 2)  # last_seq 4
    async with store.transaction() as tx:
        await tx.conversation.set_window_start(ref, 3)
        await tx.conversation.set_window_start(ref, 3)  # staying put is allowed
        await tx.conversation.set_window_start(ref, 5)  # last_seq + 1: an empty window
    for bad in (4, 6, 0):
        with pytest.raises(InvalidLimitError):
            async with store.transaction() as tx:
                await tx.conversation.set_window_start(ref, bad)
    async with store.transaction() as tx:
        info = await tx.sessions.get(ref)
        assert await tx.conversation.tail(ref) == []
    assert info is not None and info.window_start_seq == 5


async def test_system_prompt_hints_and_summary(
    store: StateStore, ref: SessionRef, clock: FakeClock, token_counter: TokenCounter
) -> None:
    await _fill(store, ref, 2)
    async with store.transaction() as tx:
        conv = tx.conversation
        await conv.set_system_prompt(ref, "You are a helpful coding assistant.")
        first = await conv.add_hint(ref, "User prefers Python over JavaScript")
        second = await conv.add_hint(ref, "Project uses PostgreSQL database")
        summary = await conv.set_summary(ref, "Alice asked two questions.", 3)
    assert first.id != second.id
    assert first.created_at == clock()
    assert summary.through_seq == 3
    assert summary.tokens == token_counter.count_text("Alice asked two questions.")
    assert summary.created_at == clock()

    async with store.transaction() as tx:
        conv = tx.conversation
        info = await tx.sessions.get(ref)
        assert [h.text for h in await conv.hints(ref)] == [first.text, second.text]
        assert await conv.summary(ref) == summary
        assert await conv.remove_hint(ref, first.id) is True
        assert await conv.remove_hint(ref, first.id) is False
        assert await conv.hints(ref) == [second]
        await conv.set_summary(ref, "Newer summary.", 4)
        await conv.set_system_prompt(ref, None)
    assert info is not None and info.system_prompt == "You are a helpful coding assistant."
    async with store.transaction() as tx:
        newer = await tx.conversation.summary(ref)
        info = await tx.sessions.get(ref)
    assert newer is not None and (newer.text, newer.through_seq) == ("Newer summary.", 4)
    assert info is not None and info.system_prompt is None


async def test_hints_belong_to_their_session(store: StateStore, make_ref, ref: SessionRef) -> None:
    other = make_ref("s2")
    await ensure(store, ref, other)
    async with store.transaction() as tx:
        hint = await tx.conversation.add_hint(ref, "only for s1")
    async with store.transaction() as tx:
        assert await tx.conversation.hints(other) == []
        assert await tx.conversation.remove_hint(other, hint.id) is False
        assert await tx.conversation.hints(ref) == [hint]


async def test_summary_cannot_cover_messages_that_do_not_exist(
    store: StateStore, ref: SessionRef
) -> None:
    await _fill(store, ref, 1)  # last_seq 2
    with pytest.raises(InvalidLimitError):
        async with store.transaction() as tx:
            await tx.conversation.set_summary(ref, "too far", 3)
    async with store.transaction() as tx:
        assert await tx.conversation.summary(ref) is None


async def test_clear_empties_the_log_and_restarts_counters(
    store: StateStore, ref: SessionRef
) -> None:
    await _fill(store, ref, 3)
    async with store.transaction() as tx:
        conv = tx.conversation
        await conv.set_system_prompt(ref, "prompt")
        await conv.add_hint(ref, "hint")
        await conv.set_summary(ref, "summary", 2)
        await conv.set_window_start(ref, 3)
        await tx.flow.save(ref, "plan", "start", {"k": 1})
    async with store.transaction() as tx:
        assert await tx.conversation.clear(ref) == 6
    async with store.transaction() as tx:
        conv = tx.conversation
        info = await tx.sessions.get(ref)
        assert await conv.messages(ref) == []
        assert await conv.hints(ref) == []
        assert await conv.summary(ref) is None
        again = await conv.append(ref, "turn-0", [user("fresh start")])
        # Clearing the log is not a reset of the other stores.
        assert await tx.flow.count(ref) == 1
    assert info is not None
    assert (info.last_seq, info.message_count, info.token_total) == (0, 0, 0)
    assert (info.window_start_seq, info.system_prompt) == (1, None)
    # Same (turn, index) as before the clear: stored again, as seq 1, tokens from zero.
    assert again[0].seq == 1 and again[0].content == "fresh start"
    assert again[0].cumulative_tokens == again[0].tokens


async def test_restore_writes_an_exported_log_verbatim(
    store: StateStore, make_ref, ref: SessionRef, clock: FakeClock
) -> None:
    stored = await _fill(store, ref, 3)
    async with store.transaction() as tx:
        await tx.conversation.add_hint(ref, "keep me")
        summary = await tx.conversation.set_summary(ref, "so far", 2)
        await tx.conversation.set_window_start(ref, 3)
        hints = await tx.conversation.hints(ref)
    copy = make_ref("imported")
    clock.advance(3600)
    async with store.transaction() as tx:
        await tx.sessions.ensure(copy)
        await tx.conversation.restore(
            copy,
            stored,
            hints=hints,
            summary=summary,
            system_prompt="imported prompt",
            window_start_seq=3,
        )
    async with store.transaction() as tx:
        conv = tx.conversation
        assert await conv.messages(copy) == stored
        assert [(h.text, h.created_at) for h in await conv.hints(copy)] == [
            (h.text, h.created_at) for h in hints
        ]
        assert await conv.summary(copy) == summary
        assert await conv.tail(copy) == stored[2:]
        info = await tx.sessions.get(copy)
        appended = await conv.append(copy, "after-import", [user("next")])
    assert info is not None
    assert (info.last_seq, info.message_count) == (6, 6)
    assert info.token_total == stored[-1].cumulative_tokens
    assert (info.system_prompt, info.window_start_seq) == ("imported prompt", 3)
    assert appended[0].seq == 7
    assert appended[0].cumulative_tokens == stored[-1].cumulative_tokens + appended[0].tokens


async def test_restore_refuses_a_session_that_has_messages(
    store: StateStore, ref: SessionRef
) -> None:
    stored = await _fill(store, ref, 1)
    with pytest.raises(AlreadyExistsError):
        async with store.transaction() as tx:
            await tx.conversation.restore(ref, stored)
    async with store.transaction() as tx:
        assert await tx.conversation.messages(ref) == stored


async def test_restore_refuses_token_totals_that_do_not_ascend(
    store: StateStore, ref: SessionRef, make_ref
) -> None:
    # The window query finds the budget's boundary by the running total: a log whose totals
    # do not ascend would silently give a wrong window, on any backend.
    stored = await _fill(store, ref, 2)
    broken = [
        stored[0],
        stored[1].model_copy(update={"cumulative_tokens": stored[0].cumulative_tokens}),
        *stored[2:],
    ]
    copy = make_ref("restored")
    async with store.transaction() as tx:
        await tx.sessions.ensure(copy)
    with pytest.raises(InvalidInputError, match="ascending cumulative_tokens"):
        async with store.transaction() as tx:
            await tx.conversation.restore(copy, broken)
    async with store.transaction() as tx:
        assert await tx.conversation.messages(copy) == []


async def test_returned_messages_are_copies(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        stored = await tx.conversation.append(ref, "t", [user("original", metadata={"a": [1]})])
        stored[0].content = "changed"
        stored[0].metadata["a"].append(2)  # type: ignore[union-attr]
    async with store.transaction() as tx:
        again = await tx.conversation.messages(ref)
    assert again[0].content == "original" and again[0].metadata == {"a": [1]}


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda c, r: c.append(r, "t", [user("x")]), id="append"),
        pytest.param(lambda c, r: c.turn_messages(r, "t"), id="turn_messages"),
        pytest.param(lambda c, r: c.messages(r), id="messages"),
        pytest.param(lambda c, r: c.tail(r, max_messages=5), id="tail"),
        pytest.param(lambda c, r: c.set_system_prompt(r, "p"), id="set_system_prompt"),
        pytest.param(lambda c, r: c.add_hint(r, "h"), id="add_hint"),
        pytest.param(lambda c, r: c.hints(r), id="hints"),
        pytest.param(lambda c, r: c.remove_hint(r, 1), id="remove_hint"),
        pytest.param(lambda c, r: c.summary(r), id="summary"),
        pytest.param(lambda c, r: c.set_summary(r, "s", 0), id="set_summary"),
        pytest.param(lambda c, r: c.set_window_start(r, 1), id="set_window_start"),
        pytest.param(lambda c, r: c.clear(r), id="clear"),
        pytest.param(lambda c, r: c.restore(r, []), id="restore"),
    ],
)
async def test_every_method_needs_the_session(store: StateStore, ref: SessionRef, call) -> None:
    with pytest.raises(SessionNotFoundError):
        async with store.transaction() as tx:
            await call(tx.conversation, ref)
    async with store.transaction() as tx:
        assert await tx.sessions.get(ref) is None
