"""LangGraph graphs as durable statecore turns, on a real Temporal dev server.

The graph (tests/integrations/langgraph_graphs.py) has plain Python nodes instead of an LLM;
LangGraph, StatecoreSaver, the plugin, the worker, the workflow and the database are real.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from statecore.contract._session import workflow_id_for
from statecore.core._models import StoredMessage
from statecore.integrations.langgraph._turns import INTERRUPT_KEY
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.langgraph_graphs import build_graph
from tests.temporal.conftest import Env, running_env
from tests.temporal.worker_kill import ROOT, sql_messages
from tests.worker_cli import base_env


class GraphEnv:
    """A worker whose plugin has the chat graph (compiled) registered under ``name``."""

    def __init__(self, env: Env, name: str, calls: Path) -> None:
        self.env, self.name, self.calls = env, name, calls
        self.sessions = env.sessions

    def node_runs(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    async def log(self, session: str) -> list[StoredMessage]:
        return await sql_messages(self.env.database_url, self.name, session)


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


@pytest.mark.parametrize(
    "dialect",
    [
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mariadb),
    ],
)
async def test_tools_interrupt_and_resume_on_postgresql_and_mariadb(
    dialect: str, dev_server: DevServer, tmp_path: Path
) -> None:
    name = f"graph-{uuid.uuid4().hex[:8]}"
    graph = build_graph(tmp_path / "node-calls").compile()
    async with (
        fresh_database(dialect, "lgturns") as url,
        running_env(dev_server, url, agents={name: graph}) as env,
    ):
        g = GraphEnv(env, name, tmp_path / "node-calls")
        first = await g.sessions.send(name, "db", "weather in Oslo", turn_id="d1")
        assert first.reply.content == "weather: sunny in Oslo"
        asked = await g.sessions.send(name, "db", "approve the refund", turn_id="d2")
        assert asked.reply.content.startswith("waiting for input:")
        resumed = await g.sessions.send(name, "db", "granted", turn_id="d3")
        assert resumed.reply.content == "the refund: granted"
        log = await g.log("db")
        assert [m.turn_id for m in log] == ["d1"] * 4 + ["d2"] * 2 + ["d3"] * 2
        assert g.node_runs() == ["assistant", "tools", "assistant", "approval", "approval"]


async def test_the_docs_graph_program_prints_what_the_doc_says(
    dev_server: DevServer, tmp_path: Path
) -> None:
    doc = (ROOT / "docs" / "langgraph.md").read_text()
    section = doc[doc.index("## Graphs as durable statecore turns") :]
    program = re.search(r"```python\n(.*?)```", section, re.S)
    printed = re.search(r"prints\n\n```\n(.*?)```", section, re.S)
    assert program is not None and printed is not None
    (tmp_path / "graphs.py").write_text(program[1])
    env = {
        **base_env(),
        "TEMPORAL_ADDRESS": dev_server.address,
        "STATECORE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'graphs.db'}",
        "STATECORE_TASK_QUEUE": f"docs-graphs-{uuid.uuid4().hex[:8]}",
    }
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "graphs.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # The program's session outlives it; on the shared dev server its fixed id would hold
    # the docs test's run of the same program on this dead queue.
    client = await Client.connect(dev_server.address)
    with contextlib.suppress(RPCError):  # not started: the asserts below say why
        await client.get_workflow_handle(workflow_id_for("billing", "customer-42")).terminate()
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == printed[1]
