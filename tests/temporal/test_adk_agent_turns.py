"""Google ADK agents as durable statecore turns, on a real Temporal dev server.

The agent's model is the rule-based ``RuleLlm`` (tests/integrations/google_adk/adk_agents.py);
ADK's agents, runner and tools, the plugin, the worker, the workflow and the database are the
real ones.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from statecore.core._errors import AgentRunError
from statecore.core._models import SessionRef, StoredMessage
from statecore.integrations.google_adk import StatecoreSessionService
from statecore.integrations.google_adk._events import EVENT_KEY
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.google_adk.adk_agents import RuleLlm, build_agent
from tests.temporal.conftest import Env, running_env

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
