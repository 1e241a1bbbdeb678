"""OpenAI Agents SDK agents as durable statecore turns, on a real Temporal dev server.

The agent's model is the deterministic RuleModel (tests/integrations/openai_agents); the SDK,
the plugin, the worker, the workflow and the database are the real ones.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from statecore.core._models import SessionRef, StoredMessage
from statecore.integrations.openai_agents._items import ITEM_KEY
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.openai_agents.agents_fixture import RuleModel, build_agent
from tests.temporal.conftest import Env, running_env


class AgentEnv:
    """A worker whose plugin has the front-desk agent registered under ``name``."""

    def __init__(self, env: Env, name: str, model: RuleModel) -> None:
        self.env, self.name, self.model = env, name, model
        self.sessions = env.sessions

    async def log(self, session: str) -> list[StoredMessage]:
        store = await open_store(self.env.database_url)
        try:
            async with store.transaction() as tx:
                ref = SessionRef(agent_id=self.name, session_id=session)
                if await tx.sessions.get(ref) is None:
                    return []
                return await tx.conversation.messages(ref)
        finally:
            await store.close()


@pytest.fixture
async def agent_env(dev_server: DevServer) -> AsyncIterator[AgentEnv]:
    model = RuleModel()
    # Workflow ids are global on the shared dev server: a fresh agent name per test.
    name = f"desk-{uuid.uuid4().hex[:8]}"
    async with (
        fresh_database("sqlite", "oaiturns") as url,
        running_env(dev_server, url, agents={name: build_agent(model)}) as env,
    ):
        yield AgentEnv(env, name, model)


def item_types(log: list[StoredMessage]) -> list[str]:
    return [str(m.metadata[ITEM_KEY].get("type", "message")) for m in log]


async def test_a_turn_runs_the_agent_with_its_tool_and_commits_every_item(
    agent_env: AgentEnv,
) -> None:
    a = agent_env
    first = await a.sessions.send(a.name, "s1", "weather in Oslo", turn_id="t1")
    assert first.turn == 1 and first.reply.content == "weather: sunny in Oslo"
    log = await a.log("s1")
    assert item_types(log) == ["message", "function_call", "function_call_output", "message"]
    assert {m.turn_id for m in log} == {"t1"}
    assert (first.first_seq, first.last_seq) == (1, 4)
    assert len(a.model.inputs) == 2  # the call, then the answer from the tool's output

    # The next turn's run sees the committed log through its session.
    second = await a.sessions.send(a.name, "s1", "what did I say", turn_id="t2")
    assert second.turn == 2 and second.reply.content == "weather in Oslo"


async def test_parallel_tool_calls_and_a_handoff(agent_env: AgentEnv) -> None:
    a = agent_env
    both = await a.sessions.send(a.name, "s2", "two cities Oslo Rome", turn_id="p1")
    assert both.reply.content == "weather: sunny in Oslo; sunny in Rome"
    handed = await a.sessions.send(a.name, "s2", "specialist", turn_id="p2")
    assert handed.reply.content == "specialist here"
    log = await a.log("s2")
    assert item_types(log) == [
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert log[7].tool_calls[0].name.startswith("transfer_to_")
