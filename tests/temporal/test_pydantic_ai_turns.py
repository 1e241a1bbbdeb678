"""Pydantic AI agents as durable statecore turns, on a real Temporal dev server.

The agents' models are Pydantic AI's own FunctionModel and TestModel
(tests/integrations/pydantic_ai/agents_fixture.py); the library, the plugin, the worker, the
workflow and the database are the real ones.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import pytest

from statecore.core._errors import ContentTooLargeError, InvalidInputError
from statecore.core._limits import MAX_MESSAGE_BYTES
from statecore.core._models import Message, SessionRef, StoredMessage
from statecore.integrations.pydantic_ai import PydanticAIAgentTurn
from statecore.integrations.pydantic_ai._codec import ENTRY_KEY, to_model_messages
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.pydantic_ai.agents_fixture import (
    Forecasts,
    build_desk_agent,
    build_form_agent,
)
from tests.temporal.conftest import Env, running_env

#: A forecast over statecore's message limit: the tool's return cannot be stored.
BIG = "x" * (MAX_MESSAGE_BYTES + 1)


class PaiEnv:
    def __init__(self, env: Env, desk: str, form: str) -> None:
        self.env, self.desk, self.form = env, desk, form
        self.sessions = env.sessions

    async def log(self, agent: str, session: str) -> list[StoredMessage]:
        store = await open_store(self.env.database_url)
        try:
            async with store.transaction() as tx:
                ref = SessionRef(agent_id=agent, session_id=session)
                if await tx.sessions.get(ref) is None:
                    return []
                return await tx.conversation.messages(ref)
        finally:
            await store.close()


@pytest.fixture
async def pai_env(dev_server: DevServer) -> AsyncIterator[PaiEnv]:
    # Workflow ids are global on the shared dev server: fresh agent names per test.
    desk, form = f"pdesk-{uuid.uuid4().hex[:8]}", f"pform-{uuid.uuid4().hex[:8]}"
    agents = {
        desk: PydanticAIAgentTurn(
            build_desk_agent(), deps=Forecasts({"Oslo": "snow", "Big": BIG}), name=desk
        ),
        form: build_form_agent(),
    }
    async with (
        fresh_database("sqlite", "paiturns") as url,
        running_env(dev_server, url, agents=agents) as env,
    ):
        yield PaiEnv(env, desk, form)


def kinds(log: list[StoredMessage]) -> list[str]:
    return [str(m.metadata[ENTRY_KEY]["message"]["kind"]) for m in log if ENTRY_KEY in m.metadata]


async def test_a_turn_runs_the_agent_with_its_tool_and_deps_and_commits_every_message(
    pai_env: PaiEnv,
) -> None:
    a = pai_env
    first = await a.sessions.send(a.desk, "s1", "weather in Oslo", turn_id="t1")
    assert first.turn == 1 and first.reply.content == "weather: snow in Oslo"
    log = await a.log(a.desk, "s1")
    assert kinds(log) == ["request", "response", "request", "response"]
    assert [m.role for m in log] == ["user", "assistant", "tool", "assistant"]
    assert {m.turn_id for m in log} == {"t1"}
    # Each stored message points at the one before it, as a ConversationStore entry does.
    entries = [m.metadata[ENTRY_KEY] for m in log]
    assert [e["parent_id"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]
    second = await a.sessions.send(a.desk, "s1", "what did I say", turn_id="t2")
    assert second.turn == 2 and second.reply.content == "weather in Oslo"
    assert len(to_model_messages(await a.log(a.desk, "s1"))) == 6
    # The model's usage (as Pydantic AI counted it) reached the session's orchestration state.
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    store = await open_store(a.env.database_url)
    try:
        async with store.transaction(read_only=True) as tx:
            state = await tx.orchestration.get(SessionRef(agent_id=a.desk, session_id="s1"))
    finally:
        await store.close()
    assert state is not None
    assert state.cumulative_token_usage == first.usage + second.usage


async def test_an_oversized_part_is_refused_and_nothing_is_stored(pai_env: PaiEnv) -> None:
    a = pai_env
    await a.sessions.send(a.desk, "big", "hello", turn_id="b1")
    before = await a.log(a.desk, "big")
    with pytest.raises(ContentTooLargeError):
        await a.sessions.send(a.desk, "big", "weather in Big", turn_id="b2")
    assert await a.log(a.desk, "big") == before
    after = await a.sessions.send(a.desk, "big", "what did I say", turn_id="b3")
    assert after.reply.content == "hello" and after.turn == 2


async def test_a_stored_message_that_does_not_parse_is_a_typed_error(pai_env: PaiEnv) -> None:
    a = pai_env
    await a.sessions.send(a.desk, "bad", "hello", turn_id="c1")
    ref = SessionRef(agent_id=a.desk, session_id="bad")
    garbage = {"id": "x", "parent_id": None, "message": {"kind": "request", "parts": 7}}
    store = await open_store(a.env.database_url)
    try:
        async with store.transaction() as tx:
            await tx.conversation.append(
                ref, "forged", [Message(role="user", content="?", metadata={ENTRY_KEY: garbage})]
            )
    finally:
        await store.close()
    before = await a.log(a.desk, "bad")
    with pytest.raises(InvalidInputError, match="not a Pydantic AI message"):
        await a.sessions.send(a.desk, "bad", "what did I say", turn_id="c2")
    assert await a.log(a.desk, "bad") == before


async def test_structured_output_is_the_reply_as_json(pai_env: PaiEnv) -> None:
    a = pai_env
    done = await a.sessions.send(a.form, "f1", "file a ticket", turn_id="o1")
    ticket = json.loads(done.reply.content)
    assert set(ticket) == {"title", "priority"} and isinstance(ticket["priority"], int)
    log = await a.log(a.form, "f1")
    calls = [c.name for m in log for c in m.tool_calls]
    assert calls == ["final_result"]
