"""OpenAI Agents SDK agents as durable statecore turns, on a real Temporal dev server.

The agent's model is the deterministic RuleModel (tests/integrations/openai_agents); the SDK,
the plugin, the worker, the workflow and the database are the real ones.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from statecore.core._models import SessionRef, StoredMessage
from statecore.integrations.openai_agents._items import ITEM_KEY
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.openai_agents.agents_fixture import RuleModel, build_agent
from tests.temporal.conftest import Env, running_env
from tests.temporal.worker_kill import session_status, until_status


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


async def test_search_attributes_migrate_close_and_the_cli_on_an_agent_session(
    dev_server: DevServer,
) -> None:
    """The rest of the operator contract on a session run by an SDK agent: it is found through
    its search attributes, moves to another task queue, closes, and the `statecore` CLI
    describes it, all as for a model-backed session."""
    model = RuleModel()
    name = f"desk-{uuid.uuid4().hex[:8]}"
    async with fresh_database("sqlite", "oaiops") as url:
        async with running_env(dev_server, url, agents={name: build_agent(model)}) as first:
            s = first.sessions
            await s.send(name, "ops", "weather in Oslo", turn_id="q1")
            handle = s.handle(name, "ops")
            query = f"StatecoreAgentId = '{name}' AND StatecoreStatus = 'active'"
            found: list[str] = []
            for _ in range(100):  # visibility is eventually consistent
                found = [w.id async for w in first.client.list_workflows(query)]
                if found:
                    break
                await asyncio.sleep(0.1)
            assert found == [handle.id]

            cli = [
                str(Path(sys.executable).with_name("statecore")),
                "--address",
                dev_server.address,
                "--task-queue",
                first.task_queue,
                "--json",
                "describe",
                name,
                "ops",
            ]
            done = await asyncio.to_thread(
                subprocess.run, cli, capture_output=True, text=True, timeout=120, check=False
            )
            assert done.returncode == 0, done.stderr
            described = json.loads(done.stdout)
            assert described["checkpoint"]["turn"] == 1, described

            second_queue = first.task_queue + "-b"
            await s.migrate(name, "ops", second_queue)
            for _ in range(100):
                if (await handle.describe()).task_queue == second_queue:
                    break
                await asyncio.sleep(0.1)
            assert (await handle.describe()).task_queue == second_queue
        agents = {name: build_agent(model)}
        async with running_env(dev_server, url, task_queue=second_queue, agents=agents) as second:
            moved = await second.sessions.send(name, "ops", "what did I say", turn_id="q2")
            assert moved.turn == 2 and moved.reply.content == "weather in Oslo"
            await second.sessions.close(name, "ops")
            await until_status(lambda: session_status(second.sessions, name, "ops"), "closed")
        # Closing kept the state: both turns' items are still in SQL.
        store = await open_store(url)
        try:
            async with store.transaction() as tx:
                log = await tx.conversation.messages(SessionRef(agent_id=name, session_id="ops"))
        finally:
            await store.close()
        assert {m.turn_id for m in log} == {"q1", "q2"}
