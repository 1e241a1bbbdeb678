"""What ``StatecoreConversationStore`` adds to, and deliberately does differently from,
Pydantic AI's contract: statecore still understands the stored messages, revisions hold
between processes, and bad input is refused with a typed error that changes nothing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationStore

from statecore.core._errors import ContentTooLargeError, InvalidIdentifierError, InvalidInputError
from statecore.core._limits import MAX_MESSAGE_BYTES
from statecore.integrations.pydantic_ai import StatecoreConversationStore
from statecore.integrations.pydantic_ai._codec import parse_messages
from statecore.operations._context_window import group_exchanges
from tests.integrations.pydantic_ai.stores import (
    SQL_STORES,
    conversations,
    database_url,
    kind,
    open_store,
)

__all__ = ["conversations", "database_url", "kind"]

#: The deliberate differences from InMemoryConversationStore, each with the case showing it
#: (docs/pydantic_ai.md lists them with their reasons).
DIFFERENCES = {
    "conversation ids are statecore identifiers": "a conversation id with a space or a slash",
    "a message over statecore's message size limit is refused": "a 600 KB user prompt",
}


def tool_history() -> list[m.ModelMessage]:
    return [
        m.ModelRequest(parts=[m.UserPromptPart(content="weather in Oslo and Rome")]),
        m.ModelResponse(
            parts=[
                m.TextPart(content="Checking both."),
                m.ToolCallPart(tool_name="weather", args={"city": "Oslo"}, tool_call_id="c-1"),
                m.ToolCallPart(tool_name="weather", args={"city": "Rome"}, tool_call_id="c-2"),
            ]
        ),
        m.ModelRequest(
            parts=[
                m.ToolReturnPart(tool_name="weather", content="sunny", tool_call_id="c-1"),
                m.ToolReturnPart(tool_name="weather", content="rain", tool_call_id="c-2"),
            ]
        ),
        m.ModelResponse(parts=[m.TextPart(content="Oslo sunny, Rome rain.")]),
    ]


async def test_the_differences_are_the_listed_ones(kind: str, database_url: str | None) -> None:
    store = open_store(kind, database_url, "diffs")
    odd = Conversation(
        conversation_id="not an/identifier",
        messages=[m.ModelRequest(parts=[m.UserPromptPart(content="hi")])],
    )
    huge = Conversation(
        conversation_id="huge",
        messages=[
            m.ModelRequest(parts=[m.UserPromptPart(content="x" * (MAX_MESSAGE_BYTES + 100_000))])
        ],
    )
    outcomes = []
    for conversation, error in ((odd, InvalidIdentifierError), (huge, ContentTooLargeError)):
        try:
            await store.save(conversation)
            outcomes.append("accepted")
        except error:
            outcomes.append("refused")
            assert await store.list_conversations() == []
    if isinstance(store, StatecoreConversationStore):
        await store.close()
    refused = outcomes.count("refused")
    assert refused == (0 if kind == "reference" else len(DIFFERENCES))


async def test_statecore_counts_tokens_and_keeps_tool_calls_with_their_returns(
    kind: str, database_url: str | None
) -> None:
    if kind == "reference":
        pytest.skip("statecore's view of the log")
    store = open_store(kind, database_url, "view")
    assert isinstance(store, StatecoreConversationStore)
    try:
        await store.save(Conversation(conversation_id="c1", messages=tool_history()))
        raw = await store._store()
        async with raw.transaction(read_only=True) as tx:
            log = await tx.conversation.messages(store.ref("c1"))
            info = await tx.sessions.get(store.ref("c1"))
        # One tool message per answer, so each return pairs with its call.
        assert [msg.role for msg in log] == ["user", "assistant", "tool", "tool", "assistant"]
        assert [c.id for c in log[1].tool_calls] == ["c-1", "c-2"]
        assert [e.status for e in group_exchanges(log)] == ["complete"] * 3
        assert len(group_exchanges(log)[1].messages) == 3
        assert all(msg.tokens > 0 for msg in log)
        assert info is not None and info.token_total == sum(msg.tokens for msg in log)
        loaded = await store.load("c1")
        assert loaded is not None and len(loaded.messages) == 4
    finally:
        await store.close()


async def test_bad_input_is_refused_and_changes_nothing(
    kind: str, database_url: str | None
) -> None:
    if kind == "reference":
        pytest.skip("statecore's typed errors")
    store = open_store(kind, database_url, "bad")
    assert isinstance(store, StatecoreConversationStore)
    try:
        ok = Conversation(conversation_id="c1", messages=tool_history())
        await store.save(ok)
        before = await store.load("c1")
        with pytest.raises(InvalidInputError, match="not a list of Pydantic AI messages"):
            parse_messages('[{"kind": "request", "parts": [{"part_kind": "nonsense"}]}]')
        with pytest.raises(InvalidInputError, match="Invalid JSON"):
            parse_messages(b"{not json")
        ok.messages.append(
            m.ModelRequest(parts=[m.UserPromptPart(content="y" * (MAX_MESSAGE_BYTES + 1))])
        )
        with pytest.raises(ContentTooLargeError):
            await store.save(ok)
        with pytest.raises(ConversationConflict):
            await store.save(Conversation(conversation_id="c1", messages=tool_history()))
        with pytest.raises(InvalidIdentifierError):
            await store.load("bad/id")
        assert await store.load("c1") == before
        ok.messages.pop()
        ok.messages.append(m.ModelRequest(parts=[m.UserPromptPart(content="fine")]))
        assert len(await store.save(ok)) == 1  # healthy afterwards
    finally:
        await store.close()


_WRITER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from pydantic_ai import messages as m
    from pydantic_ai.conversation_store import ConversationConflict
    from statecore.integrations.pydantic_ai import StatecoreConversationStore

    async def main(url, namespace, go, name):
        store = StatecoreConversationStore(database_url=url, namespace=namespace)
        conversation = await store.load("shared")
        print("loaded", flush=True)
        deadline = time.monotonic() + 60
        while not Path(go).exists():
            if time.monotonic() > deadline:
                raise SystemExit("no go signal within 60 s")
            await asyncio.sleep(0.01)
        conversation.messages.append(m.ModelRequest(parts=[m.UserPromptPart(content=name)]))
        try:
            await store.save(conversation)
            print("saved", flush=True)
        except ConversationConflict:
            print("conflict", flush=True)
        await store.close()

    asyncio.run(main(*sys.argv[1:]))
    """
)


@pytest.mark.parametrize("kind", SQL_STORES, indirect=True)
async def test_two_processes_saving_one_revision_one_wins(
    kind: str, database_url: str | None, tmp_path: Path
) -> None:
    assert database_url is not None
    store = StatecoreConversationStore(database_url=database_url, namespace="race")
    try:
        await store.save(Conversation(conversation_id="shared", messages=tool_history()))
        for round_ in range(1):
            go = tmp_path / f"go-{round_}"
            writers = [
                subprocess.Popen(
                    [sys.executable, "-c", _WRITER, database_url, "race", str(go), f"w{n}"],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for n in range(2)
            ]
            for writer in writers:  # both loaded the same revision
                assert writer.stdout is not None
                assert await asyncio.to_thread(writer.stdout.readline) == "loaded\n"
            go.touch()
            results = []
            for writer in writers:
                out, _ = await asyncio.to_thread(writer.communicate, timeout=120)
                results.append(out.strip())
            assert sorted(results) == ["conflict", "saved"], results
        loaded = await store.load("shared")
        assert loaded is not None and len(loaded.messages) == 4 + 1
    finally:
        await store.close()


async def test_two_store_objects_conflict_like_two_writers(
    conversations: ConversationStore, kind: str, database_url: str | None
) -> None:
    if kind in ("reference", "memory"):
        pytest.skip("two objects share a database only on SQL")
    assert isinstance(conversations, StatecoreConversationStore)
    other = open_store(kind, database_url, conversations.namespace)
    try:
        await conversations.save(Conversation(conversation_id="c", messages=tool_history()))
        a, b = await conversations.load("c"), await other.load("c")
        assert a is not None and b is not None
        a.messages.append(m.ModelRequest(parts=[m.UserPromptPart(content="a")]))
        b.messages.append(m.ModelRequest(parts=[m.UserPromptPart(content="b")]))
        results = await asyncio.gather(conversations.save(a), other.save(b), return_exceptions=True)
        assert sorted(type(r).__name__ for r in results) == ["ConversationConflict", "list"]
    finally:
        if isinstance(other, StatecoreConversationStore):
            await other.close()


async def test_statecore_compaction_leaves_the_stored_conversation_whole(
    kind: str, database_url: str | None
) -> None:
    """Compaction moves the session's window (what a statecore turn's context starts from);
    Pydantic AI's view, the conversation's whole history, does not change."""
    if kind == "reference":
        pytest.skip("statecore's compaction")
    store = open_store(kind, database_url, "compact")
    assert isinstance(store, StatecoreConversationStore)
    try:
        conversation = Conversation(conversation_id="c1", messages=tool_history() * 2)
        await store.save(conversation)
        raw = await store._store()
        ref = store.ref("c1")
        async with raw.transaction() as tx:
            log = await tx.conversation.messages(ref)
            await tx.conversation.set_summary(ref, "Asked about Oslo and Rome.", log[4].seq)
            await tx.conversation.set_window_start(ref, log[5].seq)
        async with raw.transaction(read_only=True) as tx:
            window = await tx.conversation.tail(ref, max_tokens=100_000)
        assert [m.seq for m in window] == [m.seq for m in log[5:]]
        loaded = await store.load("c1")
        assert loaded is not None and loaded.messages == conversation.messages
    finally:
        await store.close()
