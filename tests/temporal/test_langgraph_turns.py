"""LangGraph graphs as durable statecore turns, on a real Temporal dev server.

The graph (tests/integrations/langgraph_graphs.py) has plain Python nodes instead of an LLM;
LangGraph, StatecoreSaver, the plugin, the worker, the workflow and the database are real.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from statecore.contract.session import workflow_id_for
from statecore.core.errors import AgentRunError, SessionPausedError, UnknownAgentError
from statecore.core.models import SessionRef, StoredMessage
from statecore.integrations.langgraph import StatecoreSaver
from statecore.integrations.langgraph.turns import INTERRUPT_KEY, thread_id_for
from statecore.store import open_store
from statecore.temporal.devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.langgraph_graphs import build_graph
from tests.temporal.conftest import Env, running_env
from tests.temporal.test_durability import ROOT, sql_messages, wait_for_file


class GraphEnv:
    """A worker whose plugin has the chat graph (compiled) registered under ``name``."""

    def __init__(self, env: Env, name: str, calls: Path) -> None:
        self.env, self.name, self.calls = env, name, calls
        self.sessions = env.sessions

    def node_runs(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    async def log(self, session: str) -> list[StoredMessage]:
        return await sql_messages(self.env.database_url, self.name, session)

    async def checkpoints(self, session: str) -> int:
        store = await open_store(self.env.database_url)
        try:
            saver = StatecoreSaver.from_store(store)
            ref = SessionRef(agent_id=self.name, session_id=session)
            config = {"configurable": {"thread_id": thread_id_for(ref)}}
            return len([c async for c in saver.alist(config)])
        finally:
            await store.close()


@pytest.fixture
async def graph_env(dev_server: DevServer, tmp_path: Path) -> AsyncIterator[GraphEnv]:
    calls = tmp_path / "node-calls"
    # Workflow ids are global on the shared dev server: a fresh agent name per test.
    name = f"graph-{uuid.uuid4().hex[:8]}"
    graph = build_graph(calls).compile()
    async with (
        fresh_database("sqlite", "lgturns") as url,
        running_env(dev_server, url, agents={name: graph}) as env,
    ):
        yield GraphEnv(env, name, calls)


async def test_a_turn_runs_the_graph_and_commits_its_messages(graph_env: GraphEnv) -> None:
    g = graph_env
    first = await g.sessions.send(g.name, "s1", "weather in Oslo", turn_id="t1")
    assert first.turn == 1 and first.reply.content == "weather: sunny in Oslo"
    log = await g.log("s1")
    assert [m.role for m in log] == ["user", "assistant", "tool", "assistant"]
    assert log[1].tool_calls[0].name == "weather"
    assert log[1].tool_calls[0].arguments == '{"city": "Oslo"}'
    assert log[2].tool_call_id == log[1].tool_calls[0].id == "call-Oslo"
    assert {m.turn_id for m in log} == {"t1"}
    assert g.node_runs() == ["assistant", "tools", "assistant"]

    # The session is the graph's thread: the next turn's run sees the first turn's state.
    second = await g.sessions.send(g.name, "s1", "hello", turn_id="t2")
    assert second.reply.content == "you said: hello (2 user messages so far)"
    # The same turn id answers from its record: the graph does not run again.
    again = await g.sessions.send(g.name, "s1", "hello", turn_id="t2")
    assert again == second
    assert len(g.node_runs()) == 4
    assert len(await g.log("s1")) == 6


async def test_interrupt_ends_the_turn_and_the_next_message_resumes_it(
    graph_env: GraphEnv,
) -> None:
    g = graph_env
    asked = await g.sessions.send(g.name, "s2", "approve the deploy", turn_id="i1")
    assert asked.reply.content == 'waiting for input: {"question": "may I the deploy?"}'
    log = await g.log("s2")
    assert [m.role for m in log] == ["user", "assistant"]
    assert log[1].metadata[INTERRUPT_KEY][0]["value"] == {"question": "may I the deploy?"}
    resumed = await g.sessions.send(g.name, "s2", "yes, go", turn_id="i2")
    assert resumed.reply.content == "the deploy: yes, go"
    # The resume value is the user's message; the run did not start the graph over.
    assert g.node_runs() == ["approval", "approval"]
    after = await g.sessions.send(g.name, "s2", "thanks", turn_id="i3")
    assert after.reply.content == "you said: thanks (2 user messages so far)"
    assert [m.content for m in await g.log("s2")][2:] == [
        "yes, go",
        "the deploy: yes, go",
        "thanks",
        "you said: thanks (2 user messages so far)",
    ]


async def test_a_failing_node_stores_nothing_and_the_next_turn_forks_past_it(
    graph_env: GraphEnv,
) -> None:
    g = graph_env
    await g.sessions.send(g.name, "s3", "hello", turn_id="e1")
    before = await g.log("s3")
    with pytest.raises(AgentRunError, match="the node exploded"):
        await g.sessions.send(g.name, "s3", "explode", turn_id="e2")
    assert await g.log("s3") == before
    # The failed turn's message never reached the graph state the next turn runs on.
    after = await g.sessions.send(g.name, "s3", "again", turn_id="e3")
    assert after.turn == 2 and after.reply.content == "you said: again (2 user messages so far)"


async def test_an_unknown_graph_name_is_refused_and_the_session_goes_on(
    graph_env: GraphEnv,
) -> None:
    g = graph_env
    with pytest.raises(UnknownAgentError, match="no-such-graph"):
        await g.sessions.send(g.name, "s4", "hi", turn_id="u1", model="no-such-graph")
    assert await g.log("s4") == []
    assert await g.checkpoints("s4") == 0
    report = await g.sessions.describe(g.name, "s4")
    assert report.checkpoint is not None and report.checkpoint.status == "active"
    assert report.checkpoint.turn == 0
    # The worker's other sessions are untouched.
    ok = await g.sessions.send(g.name, "s4-ok", "hi", turn_id="u2")
    assert ok.turn == 1 and ok.reply.content == "you said: hi (1 user messages so far)"
