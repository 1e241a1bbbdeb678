"""LangGraphAgent's turn logic on a real database, without Temporal: what a retried activity
finds in the thread, and what it does with it.

The commit of the turn record is the activity's; here a run is called again for the same turn
id as an activity retried before its commit would call it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from statecore.core._models import Message, SessionRef
from statecore.core._profile import SessionProfile
from statecore.core._tokens import TokenCounter
from statecore.integrations.langgraph._turns import LangGraphAgent, thread_id_for
from statecore.operations._agent_turns import AgentTurnRequest
from statecore.store import StateStore, open_store, run_transaction
from statecore.store._migrate import upgrade_database
from tests.dbs import fresh_database
from tests.integrations.langgraph_graphs import build_graph

REF = SessionRef(agent_id="graph", session_id="retry")


@pytest.fixture
async def store() -> AsyncIterator[StateStore]:
    async with fresh_database("sqlite", "lgrunner") as url:
        await upgrade_database(url)
        opened = await open_store(url)
        await run_transaction(opened, lambda tx: tx.sessions.ensure(REF))
        try:
            yield opened
        finally:
            await opened.close()


def request(store: StateStore, turn_id: str, text: str) -> AgentTurnRequest:
    return AgentTurnRequest(
        store=store,
        ref=REF,
        turn_id=turn_id,
        new_messages=[Message(role="user", content=text)],
        profile=SessionProfile(),
        counter=TokenCounter(),
    )


async def test_a_retry_after_the_run_finished_runs_nothing_and_returns_the_same(
    store: StateStore, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    agent = LangGraphAgent(build_graph(calls))
    first = await agent.run_turn(request(store, "r1", "weather in Oslo"))
    runs = calls.read_text().splitlines()
    assert runs == ["assistant", "tools", "assistant"]
    again = await agent.run_turn(request(store, "r1", "weather in Oslo"))
    assert again == first
    assert calls.read_text().splitlines() == runs
    assert [m.role for m in first.messages] == ["user", "assistant", "tool", "assistant"]


async def test_a_retry_of_a_turn_that_stopped_at_interrupt_asks_again_without_running(
    store: StateStore, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    agent = LangGraphAgent(build_graph(calls))
    asked = await agent.run_turn(request(store, "r1", "approve the plan"))
    again = await agent.run_turn(request(store, "r1", "approve the plan"))
    assert again == asked and asked.reply.content.startswith("waiting for input:")
    assert calls.read_text().splitlines() == ["approval"]


async def test_a_thread_only_uncommitted_turns_wrote_starts_afresh(
    store: StateStore, tmp_path: Path
) -> None:
    """Turn r1 ran but never committed (its commit failed for good); r2 does not build on it."""
    agent = LangGraphAgent(build_graph(tmp_path / "calls"))
    await agent.run_turn(request(store, "r1", "hello"))
    second = await agent.run_turn(request(store, "r2", "hello again"))
    assert second.reply.content == "you said: hello again (1 user messages so far)"
    saver = agent._graph_on(store).checkpointer
    config = {"configurable": {"thread_id": thread_id_for(REF)}}
    turns = {c.metadata.get("statecore_turn_id") async for c in saver.alist(config)}
    assert turns == {"r2"}
