"""StatecoreSession on its own (no Temporal) on memory, SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import Runner

from statecore.core._errors import (
    ContentTooLargeError,
    InvalidIdentifierError,
    InvalidInputError,
)
from statecore.core._limits import MAX_MESSAGE_BYTES
from statecore.core._profile import SessionProfile
from statecore.integrations.openai_agents import StatecoreSession
from statecore.integrations.openai_agents._items import ITEM_KEY
from statecore.operations._inspection import inspect_session
from statecore.store import StateStore
from tests.integrations.openai_agents.agents_fixture import RuleModel, build_agent
from tests.store_backends import open_backend

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mariadb", id="mariadb", marks=pytest.mark.mariadb),
]

#: One of each kind of item the SDK keeps in a session, as the SDK writes them.
ITEMS: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": "weather in Paris and Rome? ünïcödé ✓"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Two lookups."}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_a",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_b",
        "name": "get_weather",
        "arguments": '{"city": "Rome"}',
    },
    {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
    {
        "type": "function_call_output",
        "call_id": "call_b",
        "output": [{"type": "input_text", "text": "rain"}],
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Sunny; rain.", "annotations": [], "logprobs": []}
        ],
    },
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    },
]


@pytest.fixture(params=BACKENDS, scope="module")
async def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[StateStore]:
    # One database per backend for the module: every test uses sessions of its own.
    directory = tmp_path_factory.mktemp("oaisession")
    async with open_backend(request.param, directory, "oaisession") as opened:
        yield opened


def new_session(store: StateStore, **kwargs: Any) -> StatecoreSession:
    return StatecoreSession(f"s-{uuid.uuid4().hex[:8]}", store=store, **kwargs)


async def test_items_round_trip_exactly_and_statecore_reads_them(store: StateStore) -> None:
    session = new_session(store)
    await session.add_items(ITEMS[:4])
    await session.add_items(ITEMS[4:])
    assert await session.get_items() == ITEMS
    assert await session.get_items(limit=2) == ITEMS[-2:]
    assert await session.get_items(limit=0) == []

    async with store.transaction() as tx:
        log = await tx.conversation.messages(session.ref)
    assert [m.metadata[ITEM_KEY] for m in log] == ITEMS
    assert [m.role for m in log] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "assistant",
    ]
    assert log[1].content == ITEMS[1]["content"]
    assert log[3].tool_calls[0].id == "call_a" and log[5].tool_call_id == "call_a"
    assert log[6].content == "rain" and log[7].content == "Sunny; rain."
    assert log[2].content == "Two lookups."


async def test_pop_item_retracts_the_newest_item_and_keeps_it_for_audit(store: StateStore) -> None:
    session = new_session(store)
    await session.add_items(ITEMS[:3])
    assert await session.pop_item() == ITEMS[2]
    assert await session.get_items() == ITEMS[:2]
    await session.add_items([ITEMS[7]])
    assert await session.get_items() == [*ITEMS[:2], ITEMS[7]]
    async with store.transaction() as tx:
        everything = await tx.conversation.messages(session.ref, include_retracted=True)
        retracted = await tx.conversation.retracted(session.ref)
    assert [m.metadata[ITEM_KEY] for m in everything] == [*ITEMS[:3], ITEMS[7]]
    assert list(retracted) == [everything[2].seq]
    async with store.transaction() as tx:
        reports = await inspect_session(tx, session.ref)
    conversation = next(r for r in reports if r.name == "conversation")
    assert (conversation.items, conversation.metadata["retracted"]) == (4, 1)

    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    async with store.transaction() as tx:
        assert await tx.conversation.messages(session.ref, include_retracted=True) == []


async def test_a_fresh_session_is_empty_and_sessions_are_apart(store: StateStore) -> None:
    one, two = new_session(store), new_session(store)
    assert await one.get_items() == [] and await one.pop_item() is None
    await one.clear_session()
    await one.add_items([ITEMS[1]])
    assert await two.get_items() == []
    same = StatecoreSession(one.session_id, store=store)
    assert await same.get_items() == [ITEMS[1]]


async def test_with_a_profile_get_items_is_the_assembled_context(store: StateStore) -> None:
    session = new_session(
        store, profile=SessionProfile(max_tokens=300, summarization_threshold=200)
    )
    filler = [{"role": "user", "content": f"old message {n} " + "word " * 30} for n in range(12)]
    await session.add_items(filler)
    await session.add_items(ITEMS[1:7])
    async with store.transaction() as tx:
        await tx.conversation.add_hint(session.ref, "The user is in Europe.")
    context = await session.get_items()
    # The hint comes first, then only the newest items that fit the budget: the parallel
    # calls and their outputs whole, the oldest filler left out.
    assert context[0]["role"] == "system" and "The user is in Europe." in context[0]["content"]
    assert context[-6:] == ITEMS[1:7]
    assert len(context) < 1 + len(filler) + 6
    raw = StatecoreSession(session.session_id, store=store)
    assert len(await raw.get_items()) == len(filler) + 6


async def test_the_sdk_runner_keeps_its_conversation_in_the_session(store: StateStore) -> None:
    session = new_session(store)
    agent = build_agent(RuleModel())
    first = await Runner.run(agent, "weather in Oslo", session=session)
    assert first.final_output == "weather: sunny in Oslo"
    second = await Runner.run(agent, "what did I say", session=session)
    assert second.final_output == "weather in Oslo"
    kinds = [i.get("type", "message") for i in await session.get_items()]
    assert kinds == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "message",
    ]


@pytest.mark.parametrize(
    ("items", "error"),
    [
        pytest.param([{"role": "user", "content": b"bytes"}], InvalidInputError, id="not-json"),
        pytest.param([{"role": "user", "content": float("nan")}], InvalidInputError, id="nan"),
        pytest.param(["just text"], InvalidInputError, id="not-an-object"),
        pytest.param({"role": "user", "content": "hi"}, InvalidInputError, id="not-a-list"),
        pytest.param(
            [{"role": "user", "content": "x" * MAX_MESSAGE_BYTES}],
            ContentTooLargeError,
            id="too-large",
        ),
        pytest.param([{"role": "user", "content": "a\x00b"}], InvalidInputError, id="nul"),
        pytest.param(
            [{"type": "function_call_output", "output": "x"}], InvalidInputError, id="no-call-id"
        ),
    ],
)
async def test_bad_items_are_refused_whole_and_the_session_still_works(
    store: StateStore, items: Any, error: type[Exception]
) -> None:
    session = new_session(store)
    await session.add_items([ITEMS[1]])
    with pytest.raises(error):
        await session.add_items([ITEMS[7], *items] if isinstance(items, list) else items)
    assert await session.get_items() == [ITEMS[1]]
    await session.add_items([ITEMS[7]])
    assert await session.get_items() == [ITEMS[1], ITEMS[7]]


@pytest.mark.parametrize(
    "session_id", ["has space", "a/b", "", "x" * 129, "..", "ünï", ":memory:", "_x", 7]
)
def test_a_session_id_statecore_cannot_store_is_refused(session_id: Any) -> None:
    with pytest.raises(InvalidIdentifierError, match="pass an id statecore can store"):
        StatecoreSession(session_id, database_url="memory://")


def test_the_sdk_examples_memory_id_is_refused_with_what_to_pass_instead() -> None:
    with pytest.raises(InvalidIdentifierError, match="database_url='memory://'") as raised:
        StatecoreSession(":memory:", database_url="sqlite:///agents.db")
    assert raised.value.code == "InvalidIdentifier"
    assert raised.value.details["value"] == ":memory:"


async def test_standalone_on_a_database_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    session = StatecoreSession("by-url", database_url=url)
    try:
        await session.add_items([ITEMS[1]])
    finally:
        await session.close()
    again = StatecoreSession("by-url", database_url=url)
    try:
        assert await again.get_items() == [ITEMS[1]]
    finally:
        await again.close()


async def test_a_limit_past_a_page_and_a_compacted_log_still_read_right(store: StateStore) -> None:
    session = new_session(store)
    await session.add_items([{"role": "user", "content": f"m{n}"} for n in range(5)])
    assert [i["content"] for i in await session.get_items(limit=5000)] == [
        f"m{n}" for n in range(5)
    ]
    async with store.transaction() as tx:
        await tx.conversation.set_window_start(session.ref, 4)
    # The raw view is the SDK's: compaction moves statecore's window, not the item list.
    assert [i["content"] for i in await session.get_items(limit=3)] == ["m2", "m3", "m4"]
