"""Pydantic AI's ``ConversationStore`` contract, written from its documentation and source
(``pydantic_ai.conversation_store`` 2.68: the docstrings of ``load``, ``save``, ``branch``,
``fork``, ``delete`` and the five storage primitives), run against Pydantic AI's own
``InMemoryConversationStore`` and ``StatecoreConversationStore`` on every backend.

Every case here passes on the reference store; the deliberate differences are in
``test_conversation_store_differences.py`` and docs/pydantic_ai.md.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.usage import RunUsage

from tests.integrations.pydantic_ai.sample_messages import (
    adapter_round_trip,
    every_part_history,
)
from tests.integrations.pydantic_ai.stores import conversations, database_url, kind

__all__ = ["conversations", "database_url", "kind"]


#: Fixed, so two messages built from the same text are equal.
AT = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def user(text: str) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.UserPromptPart(content=text, timestamp=AT)], timestamp=AT)


def reply(text: str) -> m.ModelResponse:
    return m.ModelResponse(parts=[m.TextPart(content=text)], timestamp=AT)


def turns(n: int, start: int = 0) -> list[m.ModelMessage]:
    out: list[m.ModelMessage] = []
    for i in range(start, start + n):
        out += [user(f"q{i}"), reply(f"a{i}")]
    return out


async def saved(store: ConversationStore, cid: str, n: int = 2) -> Conversation:
    conversation = Conversation(conversation_id=cid, messages=turns(n))
    await store.save(conversation)
    return conversation


async def test_a_conversation_the_store_does_not_have_loads_as_none(
    conversations: ConversationStore,
) -> None:
    assert await conversations.load("missing") is None
    assert await conversations.load_entries("missing") is None
    assert await conversations.read_record("missing") is None


async def test_save_then_load_gives_the_messages_usage_and_revision(
    conversations: ConversationStore,
) -> None:
    conversation = Conversation(
        conversation_id="c1", messages=turns(2), usage=RunUsage(input_tokens=5, requests=1)
    )
    entries = await conversations.save(conversation)
    assert [e.message for e in entries] == conversation.messages
    assert [e.parent_id for e in entries] == [None, *[e.id for e in entries[:-1]]]
    assert conversation.revision is not None
    loaded = await conversations.load("c1")
    assert loaded is not None
    assert loaded.messages == conversation.messages
    assert loaded.usage == RunUsage(input_tokens=5, requests=1)
    assert loaded.revision == conversation.revision
    assert [e.id for e in await conversations.load_entries("c1") or []] == [e.id for e in entries]


async def test_a_second_save_appends_only_the_new_messages(
    conversations: ConversationStore,
) -> None:
    conversation = await saved(conversations, "c1")
    first = await conversations.load_entries("c1")
    assert await conversations.save(conversation) == []  # nothing new
    conversation.messages += turns(1, start=5)
    added = await conversations.save(conversation)
    assert [e.message for e in added] == turns(1, start=5)
    assert first is not None and added[0].parent_id == first[-1].id
    entries = await conversations.load_entries("c1")
    assert entries is not None and [e.id for e in entries[:4]] == [e.id for e in first]
    assert len(entries) == 6


async def test_a_stale_revision_is_a_conflict_and_changes_nothing(
    conversations: ConversationStore,
) -> None:
    await saved(conversations, "c1")
    a = await conversations.load("c1")
    b = await conversations.load("c1")
    assert a is not None and b is not None
    a.messages += turns(1, start=7)
    await conversations.save(a)
    b.messages += turns(1, start=9)
    with pytest.raises(ConversationConflict) as raised:
        await conversations.save(b)
    assert raised.value.conversation_id == "c1"
    assert isinstance(raised.value, UserError)
    loaded = await conversations.load("c1")
    assert loaded is not None and loaded.messages == a.messages and loaded.revision == a.revision


async def test_saving_a_new_conversation_over_a_stored_one_is_a_conflict(
    conversations: ConversationStore,
) -> None:
    await saved(conversations, "c1")
    with pytest.raises(ConversationConflict):
        await conversations.save(Conversation(conversation_id="c1", messages=turns(1)))


async def test_a_rewritten_history_branches_and_keeps_the_old_one(
    conversations: ConversationStore,
) -> None:
    conversation = await saved(conversations, "c1")
    old = await conversations.load_entries("c1")
    assert old is not None
    rewritten = Conversation(
        conversation_id="c1",
        messages=[*conversation.messages[:2], user("other"), reply("path")],
        revision=conversation.revision,
    )
    added = await conversations.save(rewritten)
    assert [e.message for e in added] == [user("other"), reply("path")]
    assert added[0].parent_id == old[1].id
    record = await conversations.read_record("c1")
    assert record is not None and record.branches == [old[-1].id]
    # The old branch is still stored, and the conversation can branch back to it.
    back = await conversations.branch(
        "c1", from_entry=old[-1].id, expected_revision=rewritten.revision
    )
    assert back.messages == conversation.messages


async def test_load_with_a_limit_gives_the_last_messages(
    conversations: ConversationStore,
) -> None:
    await saved(conversations, "c1", n=3)
    window = await conversations.load("c1", limit=2)
    assert window is not None and window.messages == turns(3)[-2:]
    empty = await conversations.load("c1", limit=0)
    assert empty is not None and empty.messages == []
    with pytest.raises(UserError):
        await conversations.load("c1", limit=-1)
    # A save of the window appends to the whole conversation.
    window.messages += turns(1, start=4)
    await conversations.save(window)
    whole = await conversations.load("c1")
    assert whole is not None and whole.messages == turns(3) + turns(1, start=4)


async def test_branch_keeps_a_prefix_and_checks_its_arguments(
    conversations: ConversationStore,
) -> None:
    conversation = await saved(conversations, "c1", n=2)
    entries = await conversations.load_entries("c1")
    assert entries is not None
    with pytest.raises(ConversationConflict):
        await conversations.branch("c1", at=1, expected_revision="stale")
    for bad in ({"at": 9}, {"at": -1}, {"from_entry": "nope"}, {}, {"at": 1, "from_entry": "x"}):
        with pytest.raises(UserError):
            await conversations.branch("c1", expected_revision=conversation.revision, **bad)
    with pytest.raises(UserError):
        await conversations.branch("missing", at=0, expected_revision=None)
    branched = await conversations.branch("c1", at=2, expected_revision=conversation.revision)
    assert branched.messages == conversation.messages[:2]
    record = await conversations.read_record("c1")
    assert record is not None and record.branches == [entries[-1].id]
    assert record.head_id == entries[1].id
    branched.messages += [user("new"), reply("way")]
    await conversations.save(branched)
    loaded = await conversations.load("c1")
    assert loaded is not None
    assert loaded.messages == [*conversation.messages[:2], user("new"), reply("way")]


async def test_fork_shares_entries_and_refuses_an_id_in_use(
    conversations: ConversationStore,
) -> None:
    conversation = Conversation(
        conversation_id="c1", messages=turns(2), usage=RunUsage(output_tokens=3)
    )
    await conversations.save(conversation)
    source = await conversations.load_entries("c1")
    assert source is not None
    whole = await conversations.fork("c1", new_conversation_id="f1")
    assert whole.messages == conversation.messages and whole.usage == RunUsage(output_tokens=3)
    part = await conversations.fork("c1", at=2, new_conversation_id="f2")
    assert part.messages == conversation.messages[:2] and part.usage == RunUsage()
    fresh = await conversations.fork("c1", at=0)
    assert fresh.conversation_id not in ("c1", "f1", "f2") and fresh.messages == []
    f2 = await conversations.read_record("f2")
    assert f2 is not None
    assert (f2.forked_from, f2.forked_at, f2.head_id) == ("c1", source[1].id, source[1].id)
    forked = await conversations.load_entries("f1")
    assert forked is not None and [e.id for e in forked] == [e.id for e in source]
    with pytest.raises(ConversationConflict):
        await conversations.fork("c1", new_conversation_id="f1")
    with pytest.raises(UserError):
        await conversations.fork("missing", new_conversation_id="f3")
    # The fork goes on by itself; the source does not change.
    part.messages += [user("fork"), reply("only")]
    await conversations.save(part)
    again = await conversations.load("c1")
    assert again is not None and again.messages == conversation.messages


async def test_scope_keeps_a_conversation_to_its_owner(
    conversations: ConversationStore,
) -> None:
    mine = Conversation(conversation_id="c1", messages=turns(1))
    await conversations.save(mine, scope="alice")
    await conversations.save(Conversation(conversation_id="c2", messages=turns(1)), scope="bob")
    assert await conversations.load("c1", scope="bob") is None
    assert await conversations.load("c1", scope="alice") is not None
    assert [r.conversation_id for r in await conversations.list_conversations(scope="bob")] == [
        "c2"
    ]
    mine.messages += turns(1, start=3)
    with pytest.raises(ConversationConflict):
        await conversations.save(mine, scope="bob")
    await conversations.save(mine)  # the scope it was saved with before
    record = await conversations.read_record("c1")
    assert record is not None and record.scope == "alice"
    await conversations.delete("c1", scope="bob")
    assert await conversations.load("c1") is not None
    fork = await conversations.fork("c1", source_scope="alice", new_conversation_id="f1")
    assert (await conversations.read_record(fork.conversation_id) or record).scope == "alice"
    with pytest.raises(UserError):
        await conversations.fork("c1", source_scope="bob")


async def test_list_conversations_newest_first_with_a_limit(
    conversations: ConversationStore,
) -> None:
    for cid in ("a", "b", "c"):
        await saved(conversations, cid, n=1)
    a = await conversations.load("a")
    assert a is not None
    a.messages += turns(1, start=2)
    await conversations.save(a)
    listed = await conversations.list_conversations()
    assert [r.conversation_id for r in listed] == ["a", "c", "b"]
    assert [r.conversation_id for r in await conversations.list_conversations(limit=2)] == [
        "a",
        "c",
    ]
    with pytest.raises(UserError):
        await conversations.list_conversations(limit=-1)


async def test_delete_forgets_a_conversation_and_a_copy_cannot_come_back(
    conversations: ConversationStore,
) -> None:
    old = await saved(conversations, "c1")
    entries = await conversations.load_entries("c1")
    assert entries is not None
    await conversations.delete("c1")
    await conversations.delete("c1")  # already gone: nothing to do
    assert await conversations.load("c1") is None
    assert "c1" not in [r.conversation_id for r in await conversations.list_conversations()]
    with pytest.raises(KeyError):
        await conversations.read_entry(entries[0].id)  # no other history reached it
    again = await saved(conversations, "c1", n=1)
    assert again.revision != old.revision
    old.messages += turns(1, start=4)
    with pytest.raises(ConversationConflict):
        await conversations.save(old)


async def test_deleting_a_forked_conversation_keeps_what_the_fork_shares(
    conversations: ConversationStore,
) -> None:
    conversation = await saved(conversations, "c1", n=2)
    fork = await conversations.fork("c1", at=3, new_conversation_id="f1")
    fork.messages.append(reply("forked"))
    await conversations.save(fork)
    deeper = await conversations.fork("f1", at=2, new_conversation_id="f2")
    await conversations.delete("c1")
    loaded = await conversations.load("f1")
    assert loaded is not None and loaded.messages == [*conversation.messages[:3], reply("forked")]
    await conversations.delete("f1")
    still = await conversations.load("f2")
    assert still is not None and still.messages == deeper.messages
    await conversations.delete("f2")
    assert await conversations.list_conversations() == []


async def test_usage_and_deferred_tool_requests_are_kept(
    conversations: ConversationStore,
) -> None:
    from pydantic_ai.tools import DeferredToolRequests

    call = m.ToolCallPart(tool_name="approve", args={"x": 1}, tool_call_id="call-9")
    conversation = Conversation(
        conversation_id="c1",
        messages=[user("pay"), m.ModelResponse(parts=[call])],
        usage=RunUsage(input_tokens=9, output_tokens=4, requests=2, tool_calls=1),
        deferred_tool_requests=DeferredToolRequests(approvals=[call]),
    )
    await conversations.save(conversation)
    loaded = await conversations.load("c1")
    assert loaded is not None
    assert loaded.usage == conversation.usage
    assert loaded.deferred_tool_requests == conversation.deferred_tool_requests


async def test_write_record_refuses_a_head_no_one_has(conversations: ConversationStore) -> None:
    record = ConversationRecord(conversation_id="c1", head_id="no-such-entry")
    with pytest.raises(ConversationConflict):
        await conversations.write_record(record, expected_revision=None)
    assert await conversations.read_record("c1") is None
    entry = ConversationEntry(parent_id=None, message=user("hi"))
    await conversations.write_record(
        dataclasses.replace(record, head_id=entry.id), new_entries=[entry], expected_revision=None
    )
    with pytest.raises(ConversationConflict):
        await conversations.write_record(record, expected_revision=None)
    with pytest.raises(ConversationConflict):
        await conversations.delete_record("c1", expected_revision="stale")
    assert (await conversations.read_entry(entry.id)).message == user("hi")
    with pytest.raises(KeyError):
        await conversations.read_entry("no-such-entry")


async def test_every_part_kind_comes_back_as_pydantic_ais_adapter_reads_it(
    conversations: ConversationStore, kind: str
) -> None:
    # The reference store keeps copies of the objects; a store that serialises gives back
    # what Pydantic AI's own adapter reads from its own JSON (a BinaryContent holding an
    # image comes back a BinaryImage, a RetryPromptPart the part that replaces it).
    history = every_part_history()
    await conversations.save(Conversation(conversation_id="c1", messages=history))
    loaded = await conversations.load("c1")
    assert loaded is not None
    assert loaded.messages == (history if kind == "reference" else adapter_round_trip(history))
    assert adapter_round_trip(loaded.messages) == adapter_round_trip(history)
    # The reloaded history saves as nothing new.
    assert await conversations.save(loaded) == []


async def test_an_agent_run_saves_and_continues(conversations: ConversationStore) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    agent = Agent(TestModel())

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    result = await agent.run("hi", conversation=Conversation(conversation_id="c1"))
    await conversations.save(result)
    loaded = await conversations.load("c1")
    assert loaded is not None and loaded.messages == result.all_messages()
    second = await agent.run("again", conversation=loaded)
    new = await conversations.save(second)
    assert [e.message for e in new] == second.new_messages()
    whole = await conversations.load("c1")
    assert whole is not None and whole.usage == second.usage
