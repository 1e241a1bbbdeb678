"""Google ADK agents as durable statecore turns, on a real Temporal dev server.

The agent's model is the rule-based ``RuleLlm`` (tests/integrations/google_adk/adk_agents.py);
ADK's agents, runner and tools, the plugin, the worker, the workflow and the database are the
real ones.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from statecore.contract._session import workflow_id_for
from statecore.core._errors import AgentRunError, SessionPausedError, UnknownAgentError
from statecore.core._models import SessionRef, StoredMessage
from statecore.integrations.google_adk import StatecoreSessionService
from statecore.integrations.google_adk._events import EVENT_KEY
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.google_adk.adk_agents import RuleLlm, build_agent
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

pytestmark = pytest.mark.timeout(300)


class AgentEnv:
    def __init__(self, env: Env, name: str, llm: RuleLlm) -> None:
        self.env, self.name, self.llm = env, name, llm
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

    def service(self) -> StatecoreSessionService:
        return StatecoreSessionService(database_url=self.env.database_url)


@pytest.fixture
async def agent_env(dev_server: DevServer) -> AsyncIterator[AgentEnv]:
    llm = RuleLlm()
    # Workflow ids are global on the shared dev server: a fresh agent name per test.
    name = f"desk_{uuid.uuid4().hex[:8]}"
    async with (
        fresh_database("sqlite", "adkturns") as url,
        running_env(dev_server, url, agents={name: build_agent(llm)}) as env,
    ):
        yield AgentEnv(env, name, llm)


def authors(log: list[StoredMessage]) -> list[str]:
    return [str(m.metadata[EVENT_KEY]["author"]) for m in log]  # type: ignore[index]


async def test_a_turn_runs_the_agent_with_its_tool_and_commits_every_event(
    agent_env: AgentEnv,
) -> None:
    a = agent_env
    first = await a.sessions.send(a.name, "s1", "weather in Oslo", turn_id="t1")
    assert first.turn == 1 and first.reply.content == "weather: sunny in Oslo"
    log = await a.log("s1")
    assert authors(log) == ["user", "desk", "desk", "desk"]
    assert {m.turn_id for m in log} == {"t1"}
    assert "[call get_weather" in log[1].content and "sunny in Oslo" in log[2].content
    assert len(a.llm.calls) == 2
    second = await a.sessions.send(a.name, "s1", "what did I say", turn_id="t2")
    assert second.turn == 2 and second.reply.content == "weather in Oslo"
    # ADK's own view of the session, through the standalone service, is the same events.
    service = a.service()
    try:
        session = await service.get_session(app_name=a.name, user_id="user", session_id="s1")
    finally:
        await service.close()
    assert session is not None and len(session.events) == 6
    assert [e.id for e in session.events] == [
        m.metadata[EVENT_KEY]["id"] for m in await a.log("s1")
    ]  # type: ignore[index]


async def test_state_written_by_a_tool_commits_with_the_turn(agent_env: AgentEnv) -> None:
    a = agent_env
    done = await a.sessions.send(a.name, "alice@chat", "remember tea", turn_id="r1")
    assert done.reply.content == "noted"
    service = a.service()
    try:
        session = await service.get_session(app_name=a.name, user_id="alice", session_id="chat")
        assert session is not None
        assert session.state == {"notes": ["tea"], "user:fact": "tea"}
        assert await service.get_user_state(app_name=a.name, user_id="alice") == {"fact": "tea"}
        # Another session of the same user sees the user: state.
        other = await service.create_session(app_name=a.name, user_id="alice")
        assert other.state == {"user:fact": "tea"}
    finally:
        await service.close()
    # The next turn reads the committed state: its run appends to the list.
    await a.sessions.send(a.name, "alice@chat", "remember cake", turn_id="r2")
    service = a.service()
    try:
        session = await service.get_session(app_name=a.name, user_id="alice", session_id="chat")
    finally:
        await service.close()
    assert session is not None and session.state["notes"] == ["tea", "cake"]


async def test_a_sub_agent_answers_after_a_transfer(agent_env: AgentEnv) -> None:
    a = agent_env
    handed = await a.sessions.send(a.name, "s2", "specialist", turn_id="p1")
    assert handed.reply.content == "specialist here"
    assert authors(await a.log("s2")) == ["user", "desk", "desk", "specialist"]


async def test_the_same_turn_id_answers_from_its_record_without_running_the_agent(
    agent_env: AgentEnv,
) -> None:
    a = agent_env
    first = await a.sessions.send(a.name, "s3", "weather in Lima", turn_id="d1")
    calls = len(a.llm.calls)
    again = await a.sessions.send(a.name, "s3", "weather in Lima", turn_id="d1")
    assert again == first
    assert len(a.llm.calls) == calls
    assert len(await a.log("s3")) == 4


async def test_a_tool_that_raises_stores_nothing_and_the_session_goes_on(
    agent_env: AgentEnv,
) -> None:
    a = agent_env
    await a.sessions.send(a.name, "s4", "remember tea", turn_id="e1")
    before = await a.log("s4")
    with pytest.raises(AgentRunError, match="the tool exploded"):
        await a.sessions.send(a.name, "s4", "explode", turn_id="e2")
    assert await a.log("s4") == before
    after = await a.sessions.send(a.name, "s4", "what did I say", turn_id="e3")
    assert after.reply.content == "remember tea" and after.turn == 2


async def test_an_unknown_agent_name_is_refused_and_the_session_goes_on(
    agent_env: AgentEnv,
) -> None:
    a = agent_env
    with pytest.raises(UnknownAgentError, match="no-such-agent"):
        await a.sessions.send(a.name, "s5", "hi", turn_id="u1", model="no-such-agent")
    assert await a.log("s5") == []
    # The session that refused turn opened has ended with it (its model would refuse every
    # turn), its state kept; the next send opens it again on the default agent and is answered.
    report = await a.sessions.describe(a.name, "s5")
    assert report.checkpoint is not None and report.checkpoint.status == "closed"
    assert report.checkpoint.turn == 0
    again = await a.sessions.send(a.name, "s5", "again", turn_id="u3")
    assert again.turn == 1 and again.reply.content == "echo: again"
    # The worker's other sessions are untouched.
    ok = await a.sessions.send(a.name, "s5-ok", "again", turn_id="u2")
    assert ok.reply.content == "echo: again" and ok.turn == 1


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
    assert report.checkpoint is not None and report.checkpoint.turn == 1
    compacted = await s.compact(a.name, "s6", strategy="recent", max_messages=2)
    assert "conversation" in compacted.compacted
    # The run after compaction starts from the window: the first user message is out.
    said = await s.send(a.name, "s6", "what did I say", turn_id="o3")
    assert said.reply.content == "nothing yet"
    cleared = await s.reset(a.name, "s6", ["conversation"])
    assert "conversation" in cleared.cleared
    assert await a.log("s6") == []
    fresh = await s.send(a.name, "s6", "what did I say", turn_id="o4")
    assert fresh.reply.content == "nothing yet"


async def test_history_bytes_per_agent_turn_stay_flat(agent_env: AgentEnv) -> None:
    """The events live in SQL: a turn's history carries its own message and reply, never the
    earlier events, so every turn adds about the same bytes."""
    a = agent_env
    handle = a.env.client.get_workflow_handle(workflow_id_for(a.name, "flat"))
    sizes, marker_counts = [], []
    for n in range(6):
        await a.sessions.send(a.name, "flat", f"weather in City{n}", turn_id=f"f{n}")
        size, mentions = await history_size_and_mentions(handle, b"sunny in City0")
        sizes.append(size)
        marker_counts.append(mentions)
    per_turn = [later - earlier for earlier, later in itertools.pairwise(sizes[1:])]
    assert max(per_turn) - min(per_turn) <= 64, per_turn
    assert marker_counts[0] >= 1 and set(marker_counts) == {marker_counts[0]}


async def test_worker_killed_mid_run_the_turn_is_stored_once(
    env: Env, dev_server: DevServer, tmp_path: Path
) -> None:
    name = f"desk_{uuid.uuid4().hex[:8]}"
    queue = env.task_queue + "-adk"
    sessions = env.new_client()
    sessions.task_queue = queue
    calls = tmp_path / "model-calls"

    def start(delay: float) -> Any:
        return start_worker_process(
            "tests.temporal.adk_worker_process",
            dev_server.address,
            queue,
            env.database_url,
            tmp_path,
            delay,
            name,
        )

    # Each model call of the first worker takes 5 s, so the kill lands inside k2's first
    # call; heartbeats are due every 6 s, so a loaded machine's late beat is not a timeout.
    worker, replacement = start(5.0), None
    try:
        # Importing ADK and starting the worker is slow on a loaded machine.
        await wait_for_file(tmp_path / "worker-ready", within=180)
        first = await sessions.send(
            name, "kill", "weather in Oslo", turn_id="k1", model_heartbeat_seconds=6
        )
        assert first.reply.content == "weather: sunny in Oslo"
        pending = asyncio.ensure_future(
            sessions.send(name, "kill", "weather in Rome", turn_id="k2", model_heartbeat_seconds=6)
        )
        await wait_for_file(calls, lines=3, within=60)  # k2's first model call is under way
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        replacement = start(0.1)
        second = await asyncio.wait_for(pending, timeout=120)
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


async def test_migrate_and_close_an_adk_session(dev_server: DevServer) -> None:
    """The session moves to another task queue and goes on there, then closes; closing keeps
    every event in SQL, readable through the standalone service."""
    name = f"desk_{uuid.uuid4().hex[:8]}"
    async with fresh_database("sqlite", "adkops") as url:
        async with running_env(dev_server, url, agents={name: build_agent()}) as first:
            s = first.sessions
            await s.send(name, "ops", "weather in Oslo", turn_id="q1")
            handle = s.handle(name, "ops")
            second_queue = first.task_queue + "-b"
            await s.migrate(name, "ops", second_queue)
            for _ in range(100):
                if (await handle.describe()).task_queue == second_queue:
                    break
                await asyncio.sleep(0.1)
            assert (await handle.describe()).task_queue == second_queue
        agents = {name: build_agent()}
        async with running_env(dev_server, url, task_queue=second_queue, agents=agents) as second:
            moved = await second.sessions.send(name, "ops", "what did I say", turn_id="q2")
            assert moved.turn == 2 and moved.reply.content == "weather in Oslo"
            await second.sessions.close(name, "ops")
            await until_status(lambda: session_status(second.sessions, name, "ops"), "closed")
        service = StatecoreSessionService(database_url=url)
        try:
            session = await service.get_session(app_name=name, user_id="user", session_id="ops")
        finally:
            await service.close()
        assert session is not None and len(session.events) == 6


@pytest.mark.parametrize(
    "dialect",
    [
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mariadb),
    ],
)
async def test_turns_commit_events_and_state_on_server_databases(
    dev_server: DevServer, dialect: str
) -> None:
    """The turn's events and the state they change commit in one transaction on PostgreSQL
    (where a chat turn's commit is one statement) and MariaDB as on SQLite."""
    name = f"desk_{uuid.uuid4().hex[:8]}"
    llm = RuleLlm()
    async with (
        fresh_database(dialect, "adkturns") as url,
        running_env(dev_server, url, agents={name: build_agent(llm)}) as env,
    ):
        s = env.sessions
        assert (await s.send(name, "bob@c", "remember tea", turn_id="m1")).reply.content == "noted"
        said = await s.send(name, "bob@c", "weather in Oslo", turn_id="m2")
        assert said.reply.content == "weather: sunny in Oslo" and said.last_seq == 8
        with pytest.raises(AgentRunError):
            await s.send(name, "bob@c", "explode", turn_id="m3")
        service = StatecoreSessionService(database_url=url)
        try:
            session = await service.get_session(app_name=name, user_id="bob", session_id="c")
            assert await service.get_user_state(app_name=name, user_id="bob") == {"fact": "tea"}
        finally:
            await service.close()
        assert session is not None and len(session.events) == 8
        assert session.state == {"notes": ["tea"], "user:fact": "tea"}
