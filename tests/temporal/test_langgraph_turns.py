"""LangGraph graphs as durable statecore turns, on a real Temporal dev server.

The graph (tests/integrations/langgraph_graphs.py) has plain Python nodes instead of an LLM;
LangGraph, StatecoreSaver, the plugin, the worker, the workflow and the database are real.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from statecore.contract._session import workflow_id_for
from statecore.core._errors import AgentRunError, SessionPausedError, UnknownAgentError
from statecore.core._models import SessionRef, StoredMessage
from statecore.integrations.langgraph import StatecoreSaver
from statecore.integrations.langgraph._turns import INTERRUPT_KEY, thread_id_for
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.langgraph_graphs import build_graph
from tests.temporal.conftest import Env, running_env
from tests.temporal.worker_kill import (
    ROOT,
    history_size_and_mentions,
    kill_all,
    session_status,
    sql_messages,
    start_worker_process,
    until_status,
    wait_for_file,
)
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
    # The session that refused turn opened has ended with it; the next send opens it again
    # on the default graph and is answered.
    again = await g.sessions.send(g.name, "s4", "hi", turn_id="u3")
    assert again.turn == 1 and again.reply.content == "you said: hi (1 user messages so far)"
    # The worker's other sessions are untouched.
    ok = await g.sessions.send(g.name, "s4-ok", "hi", turn_id="u2")
    assert ok.turn == 1 and ok.reply.content == "you said: hi (1 user messages so far)"


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


async def test_the_operator_contract_on_a_graph_session(graph_env: GraphEnv) -> None:
    g = graph_env
    s = g.sessions
    await s.send(g.name, "s6", "weather in Quito", turn_id="o1")
    await s.pause(g.name, "s6", "maintenance")
    await until_status(lambda: session_status(s, g.name, "s6"), "paused")
    with pytest.raises(SessionPausedError):
        await s.send(g.name, "s6", "hello", turn_id="o2")
    await s.resume(g.name, "s6")
    await until_status(lambda: session_status(s, g.name, "s6"), "active")
    report = await s.describe(g.name, "s6")
    conversation = report.store("conversation")
    assert conversation is not None and conversation.items == 4
    assert report.checkpoint is not None and report.checkpoint.turn == 1
    said = await s.send(g.name, "s6", "hello", turn_id="o3")
    assert said.reply.content == "you said: hello (2 user messages so far)"
    cleared = await s.reset(g.name, "s6", ["conversation"])
    assert "conversation" in cleared.cleared
    assert await g.log("s6") == []
    # A reset conversation starts the graph's thread afresh too.
    fresh = await s.send(g.name, "s6", "hello", turn_id="o4")
    assert fresh.reply.content == "you said: hello (1 user messages so far)"


async def test_history_bytes_per_graph_turn_stay_flat(graph_env: GraphEnv) -> None:
    """The graph's state lives in SQL: a turn's history carries its own message and reply,
    never the thread's earlier messages, so turn 20 adds what turn 3 added."""
    g = graph_env
    handle = g.env.client.get_workflow_handle(workflow_id_for(g.name, "flat"))
    sizes, marker_counts = [], []
    for n in range(1, 21):
        await g.sessions.send(g.name, "flat", f"weather in City{n:02d}", turn_id=f"f{n:02d}")
        size, mentions = await history_size_and_mentions(handle, b"sunny in City01")
        sizes.append(size)
        marker_counts.append(mentions)
    # Turns 3 and 19 both skip the StatecoreTurn upsert (made on the first turn and every
    # 10th), and the once-a-run marker of that change is on turn 2.
    per_turn = {n: sizes[n - 1] - sizes[n - 2] for n in (3, 19)}
    # Only counters grow (event ids, the turn number gain a digit or a varint byte); a turn
    # that carried the thread's earlier messages would add hundreds of bytes per turn.
    assert abs(per_turn[19] - per_turn[3]) <= 64, per_turn
    # The first turn's tool output was never carried again by a later turn.
    assert marker_counts[0] >= 1 and set(marker_counts) == {marker_counts[0]}
    assert len(await g.log("flat")) == 80


def start_graph_worker(
    address: str, queue: str, url: str, markers: Path, delay: float, name: str
) -> subprocess.Popen[bytes]:
    return start_worker_process(
        "tests.temporal.graph_worker_process", address, queue, url, markers, delay, name
    )


async def test_worker_killed_mid_graph_resumes_from_the_last_checkpoint(
    env: Env, dev_server: DevServer, tmp_path: Path
) -> None:
    name = f"graph-{uuid.uuid4().hex[:8]}"
    queue = env.task_queue + "-graph"
    sessions = env.new_client()
    sessions.task_queue = queue
    calls = tmp_path / "node-calls"
    worker = start_graph_worker(dev_server.address, queue, env.database_url, tmp_path, 30.0, name)
    replacement = None
    try:
        await wait_for_file(tmp_path / "worker-ready", within=180)
        first = await sessions.send(name, "kill", "hello", turn_id="k1", model_heartbeat_seconds=2)
        assert first.reply.content == "you said: hello (1 user messages so far)"
        pending = asyncio.ensure_future(
            sessions.send(name, "kill", "weather in Rome", turn_id="k2", model_heartbeat_seconds=2)
        )
        # k2's assistant step is checkpointed and its tool node is under way.
        await wait_for_file(calls, lines=3, within=60)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        replacement = start_graph_worker(
            dev_server.address, queue, env.database_url, tmp_path, 0.0, name
        )
        second = await asyncio.wait_for(pending, timeout=90)
        assert second.turn == 2 and second.reply.content == "weather: sunny in Rome"
        # The retried turn resumed at the tool node: the assistant step that finished before
        # the kill did not run again.
        assert calls.read_text().splitlines() == [
            "assistant",
            "assistant",
            "tools",
            "tools",
            "assistant",
        ]
        log = await sql_messages(env.database_url, name, "kill")
        assert [m.seq for m in log] == list(range(1, 7))
        assert [m.turn_id for m in log] == ["k1"] * 2 + ["k2"] * 4
        assert [m.role for m in log[2:]] == ["user", "assistant", "tool", "assistant"]
        # Sending the committed turn again runs no node.
        again = await sessions.send(name, "kill", "weather in Rome", turn_id="k2")
        assert again.reply.content == second.reply.content
        assert len(calls.read_text().splitlines()) == 5
    finally:
        kill_all(worker, replacement)


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
