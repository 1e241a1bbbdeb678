"""OpenAI Agents SDK agents as durable statecore turns, on a real Temporal dev server.

The agent's model is the deterministic RuleModel (tests/integrations/openai_agents); the SDK,
the plugin, the worker, the workflow and the database are the real ones.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from statecore.contract._session import workflow_id_for
from statecore.core._errors import AgentRunError, SessionPausedError, UnknownAgentError
from statecore.core._models import SessionRef, StoredMessage
from statecore.integrations.openai_agents._items import ITEM_KEY
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.openai_agents.agents_fixture import RuleModel, build_agent
from tests.temporal.conftest import Env, running_env
from tests.temporal.worker_kill import (
    history_size_and_mentions,
    kill_all,
    session_status,
    sql_messages,
    start_worker_process,
    until_status,
    wait_for_file,
)


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


async def test_the_same_turn_id_answers_from_its_record_without_running_the_agent(
    agent_env: AgentEnv,
) -> None:
    a = agent_env
    first = await a.sessions.send(a.name, "s3", "weather in Lima", turn_id="d1")
    calls = len(a.model.inputs)
    again = await a.sessions.send(a.name, "s3", "weather in Lima", turn_id="d1")
    # The workflow answers a repeated update id with the turn's first result.
    assert again == first
    assert len(a.model.inputs) == calls
    assert len(await a.log("s3")) == 4


async def test_a_tool_that_raises_stores_nothing_and_the_session_goes_on(
    agent_env: AgentEnv,
) -> None:
    a = agent_env
    await a.sessions.send(a.name, "s4", "hello", turn_id="e1")
    before = await a.log("s4")
    with pytest.raises(AgentRunError, match="the tool exploded"):
        await a.sessions.send(a.name, "s4", "explode", turn_id="e2")
    assert await a.log("s4") == before
    after = await a.sessions.send(a.name, "s4", "what did I say", turn_id="e3")
    assert after.reply.content == "hello" and after.turn == 2


async def test_an_unknown_agent_name_is_refused_and_the_session_goes_on(
    agent_env: AgentEnv,
) -> None:
    a = agent_env
    with pytest.raises(UnknownAgentError, match="no-such-agent"):
        await a.sessions.send(a.name, "s5", "hi", turn_id="u1", model="no-such-agent")
    assert await a.log("s5") == []
    # The session that refused turn opened has ended with it (its model would refuse every
    # turn); the next send opens it again on the default agent and is answered.
    again = await a.sessions.send(a.name, "s5", "again", turn_id="u3")
    assert again.turn == 1 and again.reply.content == "echo: again"
    # The worker's other sessions are untouched.
    ok = await a.sessions.send(a.name, "s5-ok", "again", turn_id="u2")
    assert ok.reply.content == "echo: again"


async def test_the_operator_contract_is_unchanged(agent_env: AgentEnv) -> None:
    a = agent_env
    s = a.sessions
    await s.send(a.name, "s6", "weather in Quito", turn_id="o1")
    await s.pause(a.name, "s6", "maintenance")
    await until_status(lambda: session_status(s, a.name, "s6"), "paused")
    with pytest.raises(SessionPausedError):
        await s.send(a.name, "s6", "hello", turn_id="o2")
    await s.resume(a.name, "s6")
    await until_status(lambda: session_status(s, a.name, "s6"), "active")
    await s.add_hint(a.name, "s6", "Answer in French.")
    report = await s.describe(a.name, "s6")
    conversation = report.store("conversation")
    assert conversation is not None and conversation.items == 4
    compacted = await s.compact(a.name, "s6", strategy="recent", max_messages=2)
    assert "conversation" in compacted.compacted
    # The run after compaction starts from the window: the oldest user message is out.
    said = await s.send(a.name, "s6", "what did I say", turn_id="o3")
    assert "weather in Quito" not in said.reply.content
    cleared = await s.reset(a.name, "s6", ["conversation"])
    assert "conversation" in cleared.cleared
    assert await a.log("s6") == []
    fresh = await s.send(a.name, "s6", "what did I say", turn_id="o4")
    assert fresh.reply.content == "nothing yet"


async def test_history_bytes_per_agent_turn_stay_flat(agent_env: AgentEnv) -> None:
    """The conversation lives in SQL: a turn's history carries its own message and reply,
    never the earlier items, so every turn adds about the same bytes."""
    a = agent_env
    handle = a.env.client.get_workflow_handle(workflow_id_for(a.name, "flat"))
    sizes, marker_counts = [], []
    for n in range(6):
        await a.sessions.send(a.name, "flat", f"weather in City{n}", turn_id=f"f{n}")
        size, mentions = await history_size_and_mentions(handle, b"sunny in City0")
        sizes.append(size)
        marker_counts.append(mentions)
    # From the second turn on (the first one also carries the workflow's start).
    per_turn = [later - earlier for earlier, later in itertools.pairwise(sizes[1:])]
    # Event ids, counters and token totals gain a digit (or a varint byte) now and then.
    assert max(per_turn) - min(per_turn) <= 64, per_turn
    # The first turn's reply (its tool's output) was never carried again by a later turn.
    assert marker_counts[0] >= 1 and set(marker_counts) == {marker_counts[0]}


def start_agent_worker(
    address: str, queue: str, url: str, markers: Path, delay: float, name: str
) -> subprocess.Popen[bytes]:
    return start_worker_process(
        "tests.temporal.agent_worker_process", address, queue, url, markers, delay, name
    )


async def test_worker_killed_mid_run_the_turn_is_stored_once(
    env: Env, dev_server: DevServer, tmp_path: Path
) -> None:
    name = f"desk-{uuid.uuid4().hex[:8]}"
    queue = env.task_queue + "-agent"
    sessions = env.new_client()
    sessions.task_queue = queue
    calls = tmp_path / "model-calls"
    worker = start_agent_worker(dev_server.address, queue, env.database_url, tmp_path, 2.0, name)
    replacement = None
    try:
        # Importing the SDK and starting the worker is slow on a loaded machine.
        await wait_for_file(tmp_path / "worker-ready", within=180)
        first = await sessions.send(
            name, "kill", "weather in Oslo", turn_id="k1", model_heartbeat_seconds=2
        )
        assert first.reply.content == "weather: sunny in Oslo"
        pending = asyncio.ensure_future(
            sessions.send(name, "kill", "weather in Rome", turn_id="k2", model_heartbeat_seconds=2)
        )
        await wait_for_file(calls, lines=3, within=60)  # k2's first model call is under way
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        replacement = start_agent_worker(
            dev_server.address, queue, env.database_url, tmp_path, 0.1, name
        )
        second = await asyncio.wait_for(pending, timeout=90)
        assert second.turn == 2 and second.reply.content == "weather: sunny in Rome"
        # k1: 2 calls; k2: 1 killed with its worker, then 2 on the replacement.
        assert len(calls.read_text().splitlines()) == 5
        log = await sql_messages(env.database_url, name, "kill")
        assert [m.seq for m in log] == list(range(1, 9))
        assert [m.turn_id for m in log] == ["k1"] * 4 + ["k2"] * 4
        # Sending the committed turn again calls no model.
        again = await sessions.send(name, "kill", "weather in Rome", turn_id="k2")
        assert again.reply.content == second.reply.content
        assert len(calls.read_text().splitlines()) == 5
    finally:
        kill_all(worker, replacement)


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
