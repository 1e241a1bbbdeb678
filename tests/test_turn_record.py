"""A turn record keeps no second copy of the reply: a duplicate send rebuilds it from the
stored message, and records written with the reply inside (earlier releases) still answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.testing import ActivityEnvironment

from statecore.activities.resources import WorkerResources
from statecore.activities.turns import TurnActivities
from statecore.contract.activities import CommitTurnInput, GenerateInput
from statecore.core.errors import NotFoundError
from statecore.core.models import Message, SessionRef, TokenUsage, ToolCall
from statecore.core.turn_commit import TURN_BUCKET, commit_turn, find_turn
from statecore.llm.offline import OfflineModel
from statecore.store.migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database

DIALECTS = [
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("sqlite"),
    pytest.param("mysql", marks=pytest.mark.mariadb),
]
REF = SessionRef(namespace="record", agent_id="agent", session_id="s1")


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
        record = await tx.kv.get(REF.kv_scope, TURN_BUCKET, "t-1")
        again = await find_turn(tx, REF, "t-1")
    assert record is not None
    assert "reply" not in record.value["result"]
    assert record.value["result"]["reply_seq"] == first.last_seq == 2
    assert "Oslo" not in str(record.value)
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
        record = await tx.kv.get(REF.kv_scope, TURN_BUCKET, "t-1")
        again = await find_turn(tx, REF, "t-1")
    assert record is not None and record.value["result"]["reply"]["content"] == "kept elsewhere"
    assert again is not None and again.result is not None and again.result.reply == reply


@pytest.mark.parametrize("store", DIALECTS, indirect=True)
async def test_a_record_with_the_reply_inside_still_answers_a_duplicate_send(
    store: SqlStateStore,
) -> None:
    # The layout earlier releases wrote: the whole result, reply included.
    old = {
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
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        await tx.kv.put(REF.kv_scope, TURN_BUCKET, "old-turn", old, expected_revision=0)
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
        await tx.kv.put(
            REF.kv_scope,
            TURN_BUCKET,
            "t-9",
            {"turn": 1, "first_seq": 1, "last_seq": 2, "result": {"reply_seq": 2}},
        )
    async with store.transaction() as tx:
        with pytest.raises(NotFoundError, match="reply message 2"):
            await find_turn(tx, REF, "t-9")
