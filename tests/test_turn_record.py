"""A turn record keeps no second copy of the reply: a duplicate send rebuilds it from the
stored message, records are short arrays, and records in the object layouts of earlier
releases (``result.reply_seq``, ``result.reply``) still answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.testing import ActivityEnvironment

from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import CommitTurnInput, CommitTurnResult, GenerateInput
from statecore.core._errors import NotFoundError, RevisionConflictError
from statecore.core._models import Message, SessionRef, StoredMessage, TokenUsage, ToolCall
from statecore.llm._offline import OfflineModel
from statecore.operations._turn_commit import commit_turn, find_turn
from statecore.operations._turn_record import compact_record, expanded_record, record_value
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database

DIALECTS = [
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("sqlite"),
    pytest.param("mysql", marks=pytest.mark.mariadb),
]
REF = SessionRef(namespace="record", agent_id="agent", session_id="s1")

#: A record in the layout earlier releases wrote: the whole result, reply included.
REPLY_INSIDE_RECORD = {
    "last_seq": 2,
    "message_count": 2,
    "token_total": 17,
    "window_tokens": 17,
    "turn": 1,
    "duplicate": False,
    "first_seq": 1,
    "state_version": None,
    "result": {
        "reply": {"role": "assistant", "content": "stored long ago"},
        "usage": {"prompt_tokens": 9, "completion_tokens": 3},
        "context_tokens": 12,
    },
}


@pytest.fixture
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SqlStateStore]:
    async with fresh_database(request.param, "record") as url:
        await upgrade_database(url)
        opened = await SqlStateStore.connect(url)
        try:
            yield opened
        finally:
            await opened.close()


def _turn(turn_id: str, reply: Message, *, in_messages: bool = True) -> CommitTurnInput:
    user = Message(role="user", content=f"question of {turn_id}")
    return CommitTurnInput(
        ref=REF,
        turn_id=turn_id,
        turn=1,
        messages=[user, reply] if in_messages else [user],
        usage=TokenUsage(prompt_tokens=21, completion_tokens=4),
        result={
            "reply": reply.model_dump(),
            "usage": {"prompt_tokens": 21, "completion_tokens": 4},
            "context_tokens": 30,
        },
    )


@pytest.mark.parametrize("store", DIALECTS, indirect=True)
async def test_record_points_at_the_reply_and_a_duplicate_rebuilds_it(
    store: SqlStateStore,
) -> None:
    reply = Message(
        role="assistant",
        content="calling the weather tool",
        tool_calls=[ToolCall(id="c1", name="weather", arguments='{"city": "Oslo"}')],
    )
    commit = _turn("t-1", reply)
    async with store.transaction() as tx:
        first = await commit_turn(tx, commit)
    async with store.transaction() as tx:
        record = await tx.turns.get(REF, "t-1")
        again = await find_turn(tx, REF, "t-1")
    # turn 1, last seq 2, first seq 1, the token counters, then the outcome: the reply is
    # message last_seq, so it is not named at all.
    assert record == [1, 2, 1, first.token_total, first.window_tokens, [21, 4, 30]]
    assert expanded_record(record)["result"]["reply_seq"] == first.last_seq == 2
    assert "Oslo" not in str(record)
    assert again is not None and again.duplicate
    assert again.result is not None and again.result.reply == reply
    assert (again.result.usage, again.result.context_tokens) == (commit.usage, 30)
    assert again.model_dump(exclude={"duplicate"}) == first.model_dump(exclude={"duplicate"})


@pytest.mark.parametrize("store", DIALECTS, indirect=True)
async def test_a_reply_not_stored_as_a_message_stays_in_its_record(store: SqlStateStore) -> None:
    reply = Message(role="assistant", content="kept elsewhere")
    async with store.transaction() as tx:
        await commit_turn(tx, _turn("t-1", reply, in_messages=False))
    async with store.transaction() as tx:
        record = await tx.turns.get(REF, "t-1")
        again = await find_turn(tx, REF, "t-1")
    assert record is not None and record[5][3] == {"role": "assistant", "content": "kept elsewhere"}
    assert again is not None and again.result is not None and again.result.reply == reply


@pytest.mark.parametrize("store", DIALECTS, indirect=True)
async def test_a_record_with_the_reply_inside_still_answers_a_duplicate_send(
    store: SqlStateStore,
) -> None:
    old = REPLY_INSIDE_RECORD
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        await tx.turns.insert(REF, "old-turn", old)
    resources = WorkerResources(models={"default": OfflineModel()})
    resources.attach(store)
    out = await ActivityEnvironment().run(
        TurnActivities(resources).generate,
        GenerateInput(
            ref=REF,
            turn_id="old-turn",
            commit=CommitTurnInput(
                ref=REF, turn_id="old-turn", turn=1, messages=[Message(role="user", content="hi")]
            ),
        ),
    )
    assert out.message.content == "stored long ago"
    assert out.usage == TokenUsage(prompt_tokens=9, completion_tokens=3)
    assert out.commit is not None and out.commit.duplicate and out.commit.last_seq == 2
    async with store.transaction() as tx:
        assert await tx.conversation.messages(REF) == []  # nothing new stored


@pytest.mark.parametrize("store", DIALECTS, indirect=True)
async def test_a_record_whose_reply_message_is_gone_fails_with_a_typed_error(
    store: SqlStateStore,
) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        await tx.turns.insert(
            REF, "t-9", {"turn": 1, "first_seq": 1, "last_seq": 2, "result": {"reply_seq": 2}}
        )
    async with store.transaction() as tx:
        with pytest.raises(NotFoundError, match="reply message 2"):
            await find_turn(tx, REF, "t-9")


@pytest.mark.parametrize("store", DIALECTS, indirect=True)
async def test_a_second_record_of_one_turn_is_refused(store: SqlStateStore) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        await tx.turns.insert(REF, "t-1", [1])
    with pytest.raises(RevisionConflictError):
        async with store.transaction() as tx:
            await tx.turns.insert(REF, "t-1", [2])
    async with store.transaction() as tx:
        assert await tx.turns.get(REF, "t-1") == [1]
        assert await tx.turns.count(REF) == 1


def _stored(seq: int, role: str, content: str) -> StoredMessage:
    return StoredMessage.model_validate(
        {
            "role": role,
            "content": content,
            "seq": seq,
            "turn_id": "t",
            "index": seq,
            "tokens": 5,
            "cumulative_tokens": 5 * seq,
            "created_at": "2030-01-01T00:00:00Z",
        }
    )


def _result(**fields: object) -> CommitTurnResult:
    base: dict[str, object] = {
        "turn": 7,
        "duplicate": False,
        "first_seq": 13,
        "last_seq": 14,
        "message_count": 14,
        "token_total": 900,
        "window_tokens": 300,
    }
    return CommitTurnResult.model_validate({**base, **fields})


REPLY = {"role": "assistant", "content": "done"}


@pytest.mark.parametrize(
    ("result", "stored", "encoded"),
    [
        # A model call's turn: the reply is the last message, usage and context kept.
        (
            _result(result={"reply": REPLY, "usage": {"prompt_tokens": 80}, "context_tokens": 90}),
            [_stored(13, "user", "go"), _stored(14, "assistant", "done")],
            [7, 14, 1, 900, 300, [80, 0, 90]],
        ),
        # The reply is stored, but not last: its seq is named.
        (
            _result(result={"reply": REPLY}),
            [_stored(13, "assistant", "done"), _stored(14, "user", "thanks")],
            [7, 14, 1, 900, 300, [0, 0, 0, 13]],
        ),
        # The reply is not in the log: the record holds it.
        (
            _result(result={"reply": REPLY}),
            [_stored(13, "user", "go")],
            [7, 14, 1, 900, 300, [0, 0, 0, REPLY]],
        ),
        # No model call; a state version; counters that are not the usual ones.
        (
            _result(message_count=12, state_version=3),
            [],
            [7, 14, 1, 900, 300, None, 2, 3],
        ),
        # A turn that stored nothing in an empty log.
        (
            _result(first_seq=0, last_seq=0, message_count=0, token_total=0, window_tokens=0),
            [],
            [7],
        ),
    ],
)
def test_compact_records_round_trip(
    result: CommitTurnResult, stored: list[StoredMessage], encoded: list[object]
) -> None:
    value = record_value(result, stored)
    assert value == encoded
    fields = expanded_record(value)
    # The object layout says the same: it compacts back into the same array.
    assert compact_record(fields) == value
    assert {k: fields[k] for k in ("turn", "first_seq", "last_seq", "message_count")} == {
        k: getattr(result, k) for k in ("turn", "first_seq", "last_seq", "message_count")
    }
    assert fields.get("state_version") == result.state_version
    outcome = fields.get("result")
    if result.result is None:
        assert outcome is None
    else:
        assert outcome is not None
        assert outcome["usage"] == result.result.usage.model_dump()
        assert outcome["context_tokens"] == result.result.context_tokens


def test_records_in_the_object_layout_read_as_they_are() -> None:
    old = {"turn": 1, "first_seq": 1, "last_seq": 2, "result": {"reply_seq": 2}}
    assert expanded_record(old) is old


@pytest.mark.parametrize(
    ("old", "compact"),
    [
        # The layout releases before the reply_seq one wrote.
        (
            REPLY_INSIDE_RECORD,
            [1, 2, 1, 17, 17, [9, 3, 12, {"role": "assistant", "content": "stored long ago"}]],
        ),
        ({"turn": 1, "first_seq": 1, "last_seq": 2, "message_count": 2, "result": {}}, [1, 2, 1]),
        (
            # No message_count: it was 0 then, and stays 0.
            {"turn": 4, "first_seq": 3, "last_seq": 6, "result": {"reply_seq": 5}},
            [4, 6, 3, 0, 0, [0, 0, 0, 5], 6],
        ),
    ],
)
def test_object_layout_records_compact_without_loss(
    old: dict[str, object], compact: list[object]
) -> None:
    assert compact_record(old) == compact
    again = expanded_record(compact)
    assert CommitTurnResult.model_validate(
        {**again, "duplicate": True, "result": None}
    ) == CommitTurnResult.model_validate({**old, "duplicate": True, "result": None})


@pytest.mark.parametrize(
    "odd",
    [
        {"turn": 1},  # no first_seq: it never validated
        {"turn": 1, "first_seq": 1, "note": "a field the array has no place for"},
        {"turn": 1, "first_seq": 1, "result": {"reply_seq": 2, "reply": {"role": "user"}}},
        {"turn": 1, "first_seq": 1, "result": {"usage": {"prompt_tokens": 1.5}, "reply_seq": 1}},
        [1, 2],
    ],
)
def test_records_the_array_cannot_say_are_kept_as_they_are(odd: object) -> None:
    assert compact_record(odd) is odd


@pytest.mark.parametrize("store", DIALECTS, indirect=True)
async def test_every_layout_answers_a_duplicate_with_the_same_result(store: SqlStateStore) -> None:
    reply = Message(role="assistant", content="the answer")
    async with store.transaction() as tx:
        first = await commit_turn(tx, _turn("t-1", reply))
        compact = await tx.turns.get(REF, "t-1")
        # The object layout the previous release wrote for the same turn.
        await tx.turns.insert(REF, "t-2", expanded_record(compact))
        again = await find_turn(tx, REF, "t-1")
        older = await find_turn(tx, REF, "t-2")
    expected = first.model_dump(exclude={"duplicate"})
    assert again is not None and again.model_dump(exclude={"duplicate"}) == expected
    assert older is not None and older.model_dump(exclude={"duplicate"}) == expected
