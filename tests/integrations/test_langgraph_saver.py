"""StatecoreSaver under real LangGraph graphs: state survives reopening and equals what
LangGraph's in-memory reference saver holds, any thread and namespace string works, the sync
form runs graphs without an event loop, interrupts resume, and prune/copy keep DeltaChannel
state rebuildable."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from sqlalchemy import func, select

from statecore.core._errors import InvalidInputError
from statecore.integrations.langgraph import StatecoreSaver
from statecore.store import open_store
from statecore.store.sql._schema import graph_blobs, graph_checkpoints
from tests.integrations.langgraph_chat import append_messages, build_chat, user_message
from tests.integrations.langgraph_dbs import DIALECTS, migrated_database, open_saver

#: Snapshot often, so a few turns cross several DeltaChannel snapshots (and segments).
SNAPSHOT_EVERY = 3


class FrequentSnapshots(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages, snapshot_frequency=3)]


class PlainMessages(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _chat(state_type: Any, checkpointer: Any) -> Any:
    def reply(state: dict[str, Any]) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [{"role": "assistant", "content": f"reply to {n}", "id": f"a{n}"}]}

    builder: StateGraph[Any] = StateGraph(state_type)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=checkpointer)


async def _messages(graph: Any, config: dict[str, Any]) -> list[tuple[str, str]]:
    state = await graph.aget_state(config)
    return [(m.id, m.content) for m in state.values["messages"]]


@pytest.mark.parametrize("state_type", [FrequentSnapshots, PlainMessages], ids=["delta", "plain"])
@pytest.mark.parametrize("dialect", DIALECTS)
async def test_graph_state_survives_reopening_and_matches_the_reference_saver(
    dialect: str, state_type: Any
) -> None:
    config = {"configurable": {"thread_id": "chat"}}
    reference = _chat(state_type, InMemorySaver())
    async with migrated_database(dialect) as url:
        async with StatecoreSaver.from_conn_string(url) as saver:
            graph = _chat(state_type, saver)
            for turn in range(1, 6):
                await graph.ainvoke(user_message(turn), config)
                await reference.ainvoke(user_message(turn), config)
        async with StatecoreSaver.from_conn_string(url) as saver:
            graph = _chat(state_type, saver)
            for turn in range(6, 9):
                await graph.ainvoke(user_message(turn), config)
                await reference.ainvoke(user_message(turn), config)
            got = await _messages(graph, config)
            assert got == await _messages(reference, config)
            assert len(got) == 16
            # Time travel: every stored checkpoint rebuilds the state it had.
            history = [s async for s in graph.aget_state_history(config)]
            ref_history = [s async for s in reference.aget_state_history(config)]
            assert [len(s.values.get("messages", [])) for s in history] == [
                len(s.values.get("messages", [])) for s in ref_history
            ]


NAMES = [
    "",
    "x" * 5000,
    "日本語のスレッド 🧵",
    "nul\x00inside",
    "   spaces and 'quotes\" and %s and \\",
]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_any_thread_id_and_namespace_string_works_and_stays_apart(dialect: str) -> None:
    async with open_saver(dialect) as saver:
        for i, thread in enumerate(NAMES):
            for ns in ("", "child:1", NAMES[(i + 1) % len(NAMES)] or "root|x"):
                config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
                graph_cp = {
                    "v": 1,
                    "id": f"1ef{i:05d}-0000-6000-8000-000000000000",
                    "ts": "2026-01-01T00:00:00+00:00",
                    "channel_values": {"value": [thread, ns]},
                    "channel_versions": {"value": 1},
                    "versions_seen": {},
                    "updated_channels": None,
                }
                stored = await saver.aput(
                    config, graph_cp, {"source": "input", "step": -1}, {"value": 1}
                )
                await saver.aput_writes(stored, [("value", ns)], task_id=thread or "t")
        for thread in NAMES:
            for ns in ("", "child:1"):
                got = await saver.aget_tuple(
                    {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
                )
                assert got is not None
                assert got.checkpoint["channel_values"]["value"] == [thread, ns]
                assert got.config["configurable"]["thread_id"] == thread
                assert got.pending_writes == [(thread or "t", "value", ns)]
            listed = [t async for t in saver.alist({"configurable": {"thread_id": thread}})]
            assert len(listed) == 3
        await saver.adelete_thread(NAMES[1])
        assert await saver.aget_tuple({"configurable": {"thread_id": NAMES[1]}}) is None
        assert await saver.aget_tuple({"configurable": {"thread_id": NAMES[2]}}) is not None


def test_sync_form_runs_a_graph_without_an_event_loop(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'sync.db'}"
    config = {"configurable": {"thread_id": "sync"}}
    with StatecoreSaver.from_conn_string(url) as saver:
        saver.setup()
        graph = build_chat("delta", saver)
        for turn in range(1, 4):
            result = graph.invoke(user_message(turn), config)
        assert len(result["messages"]) == 6
        assert saver.get_tuple(config) is not None
        assert len(list(saver.list(config))) >= 3
    with StatecoreSaver.from_conn_string(url) as saver:
        assert len(build_chat("delta", saver).get_state(config).values["messages"]) == 6


async def test_sync_call_on_the_saver_loop_refuses_and_from_a_thread_works() -> None:
    async with open_saver("sqlite") as saver:
        config = {"configurable": {"thread_id": "t"}}
        await build_chat("default", saver).ainvoke(user_message(1), config)
        with pytest.raises(asyncio.InvalidStateError, match="aget_tuple"):
            saver.get_tuple(config)
        got = await asyncio.to_thread(saver.get_tuple, config)
        assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == 2
        # A sync graph run in a worker thread uses the sync methods through the loop.
        result = await asyncio.to_thread(
            build_chat("default", saver).invoke, user_message(2), config
        )
        assert len(result["messages"]) == 4
        assert threading.current_thread() is threading.main_thread()


async def test_on_an_open_statecore_store(tmp_path: Any) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 's.db'}", migrate=True)
    try:
        saver = StatecoreSaver.from_store(store)
        config = {"configurable": {"thread_id": "on-store"}}
        result = await build_chat("delta", saver).ainvoke(user_message(1), config)
        assert len(result["messages"]) == 2
    finally:
        await store.close()
    memory = await open_store("memory://")
    with pytest.raises(InvalidInputError, match="SQL statecore store"):
        StatecoreSaver.from_store(memory)


class Approval(TypedDict):
    request: str
    decision: str


async def test_interrupt_ends_the_run_and_a_resume_continues_it() -> None:
    def ask(state: Approval) -> dict[str, str]:
        return {"decision": interrupt({"question": f"approve {state['request']}?"})}

    builder: StateGraph[Any] = StateGraph(Approval)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    async with open_saver("sqlite") as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "hitl"}}
        first = await graph.ainvoke({"request": "refund"}, config)
        assert first["__interrupt__"][0].value == {"question": "approve refund?"}
        assert (await graph.aget_state(config)).next == ("ask",)
        done = await graph.ainvoke(Command(resume="yes"), config)
        assert done == {"request": "refund", "decision": "yes"}


async def test_prune_and_copy_keep_delta_state_rebuildable() -> None:
    async with open_saver("sqlite") as saver:
        graph = _chat(FrequentSnapshots, saver)
        source = {"configurable": {"thread_id": "source"}}
        for turn in range(1, 8):
            await graph.ainvoke(user_message(turn), source)
        before = await _messages(graph, source)

        await saver.acopy_thread("source", "copy")
        copy = {"configurable": {"thread_id": "copy"}}
        assert await _messages(graph, copy) == before
        with pytest.raises(InvalidInputError, match="already has checkpoints"):
            await saver.acopy_thread("source", "copy")

        async def count(table: Any) -> int:
            async with saver.engine.connect() as conn:
                return int(await conn.scalar(select(func.count()).select_from(table)))

        checkpoints, blobs = await count(graph_checkpoints), await count(graph_blobs)
        await saver.aprune(["source"], strategy="keep_latest")
        assert await count(graph_checkpoints) < checkpoints
        assert await count(graph_blobs) < blobs
        assert await _messages(graph, source) == before
        # The pruned thread goes on as before; the copy was not touched.
        await graph.ainvoke(user_message(8), source)
        assert len(await _messages(graph, source)) == 16
        assert await _messages(graph, copy) == before

        await saver.aprune(["source", "copy"], strategy="delete")
        assert await count(graph_checkpoints) == 0 and await count(graph_blobs) == 0


async def test_an_unchanged_channel_is_never_written_again() -> None:
    async with open_saver("sqlite") as saver:
        config: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        values = {"big": "b" * 10_000, "small": 1}
        first = {
            "v": 1,
            "id": "1ef00000-0000-6000-8000-000000000001",
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": values,
            "channel_versions": {"big": 1, "small": 1},
            "versions_seen": {},
            "updated_channels": None,
        }
        stored = await saver.aput(config, first, {"step": 0}, {"big": 1, "small": 1})
        second = {
            **first,
            "id": "1ef00000-0000-6000-8000-000000000002",
            "channel_values": {**values, "small": 2},
            "channel_versions": {"big": 1, "small": 2},
        }
        await saver.aput(stored, second, {"step": 1}, {"small": 2})
        async with saver.engine.connect() as conn:
            rows = await conn.scalar(select(func.count()).select_from(graph_blobs))
        assert rows == 3  # big@1, small@1, small@2
        latest = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
        assert latest is not None
        assert latest.checkpoint["channel_values"] == {"big": "b" * 10_000, "small": 2}
        assert latest.parent_config["configurable"]["checkpoint_id"] == first["id"]
