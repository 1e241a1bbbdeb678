"""Pydantic AI agents as durable statecore turns, on a real Temporal dev server.

The agents' models are Pydantic AI's own FunctionModel and TestModel
(tests/integrations/pydantic_ai/agents_fixture.py); the library, the plugin, the worker, the
workflow and the database are the real ones.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from statecore.contract._session import workflow_id_for
from statecore.core._errors import (
    AgentRunError,
    ContentTooLargeError,
    InvalidInputError,
    SessionPausedError,
    UnknownAgentError,
)
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
from tests.temporal.worker_kill import (
    history_size_and_mentions,
    kill_all,
    session_status,
    sql_messages,
    start_worker_process,
    until_status,
    wait_for_file,
)

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


async def test_a_failing_tool_stores_nothing_and_the_session_goes_on(pai_env: PaiEnv) -> None:
    a = pai_env
    await a.sessions.send(a.desk, "s2", "hello", turn_id="e1")
    before = await a.log(a.desk, "s2")
    with pytest.raises(AgentRunError, match="the tool exploded"):
        await a.sessions.send(a.desk, "s2", "explode", turn_id="e2")
    assert await a.log(a.desk, "s2") == before
    after = await a.sessions.send(a.desk, "s2", "what did I say", turn_id="e3")
    assert after.reply.content == "hello" and after.turn == 2


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


async def test_an_unknown_agent_name_is_refused_and_the_session_goes_on(
    pai_env: PaiEnv,
) -> None:
    a = pai_env
    with pytest.raises(UnknownAgentError, match="no-such-agent"):
        await a.sessions.send(a.desk, "s5", "hi", turn_id="u1", model="no-such-agent")
    assert await a.log(a.desk, "s5") == []
    # The session that refused turn opened has ended with it (its model would refuse every
    # turn), its state kept; the next send opens it again on the default agent and is answered.
    report = await a.sessions.describe(a.desk, "s5")
    assert report.checkpoint is not None and report.checkpoint.status == "closed"
    assert report.checkpoint.turn == 0
    again = await a.sessions.send(a.desk, "s5", "again", turn_id="u3")
    assert again.turn == 1 and again.reply.content == "echo: again"
    # The worker's other sessions are untouched.
    ok = await a.sessions.send(a.desk, "s5-ok", "again", turn_id="u2")
    assert ok.reply.content == "echo: again" and ok.turn == 1


async def test_the_operator_contract_pause_describe_compact_reset(pai_env: PaiEnv) -> None:
    a = pai_env
    s = a.sessions
    await s.send(a.desk, "s6", "weather in Quito", turn_id="o1")
    await s.pause(a.desk, "s6", "maintenance")
    await until_status(lambda: session_status(s, a.desk, "s6"), "paused")
    with pytest.raises(SessionPausedError):
        await s.send(a.desk, "s6", "hello", turn_id="o2")
    await s.resume(a.desk, "s6")
    await until_status(lambda: session_status(s, a.desk, "s6"), "active")
    report = await s.describe(a.desk, "s6")
    conversation = report.store("conversation")
    assert conversation is not None and conversation.items == 4
    compacted = await s.compact(a.desk, "s6", strategy="recent", max_messages=2)
    assert "conversation" in compacted.compacted
    # The run after compaction starts from the window: the oldest user message is out.
    said = await s.send(a.desk, "s6", "what did I say", turn_id="o3")
    assert said.reply.content != "weather in Quito"
    cleared = await s.reset(a.desk, "s6", ["conversation"])
    assert "conversation" in cleared.cleared
    fresh = await s.send(a.desk, "s6", "what did I say", turn_id="o4")
    assert fresh.reply.content == "nothing yet"


async def test_history_bytes_per_agent_turn_stay_flat(pai_env: PaiEnv) -> None:
    a = pai_env
    handle = a.env.client.get_workflow_handle(workflow_id_for(a.desk, "flat"))
    sizes, mentions = [], []
    for n in range(6):
        await a.sessions.send(a.desk, "flat", f"weather in City{n}", turn_id=f"f{n}")
        size, count = await history_size_and_mentions(handle, b"sunny in City0")
        sizes.append(size)
        mentions.append(count)
    per_turn = [later - earlier for earlier, later in itertools.pairwise(sizes[1:])]
    assert max(per_turn) - min(per_turn) <= 64, per_turn
    # The first turn's tool return was never carried again by a later turn.
    assert mentions[0] >= 1 and set(mentions) == {mentions[0]}


async def test_worker_killed_mid_run_the_turn_is_stored_once(
    env: Env, dev_server: DevServer, tmp_path: Path
) -> None:
    name = f"pdesk-{uuid.uuid4().hex[:8]}"
    queue = env.task_queue + "-pai"
    sessions = env.new_client()
    sessions.task_queue = queue
    calls = tmp_path / "model-calls"
    module = "tests.temporal.pydantic_ai_worker_process"
    start = (dev_server.address, queue, env.database_url, tmp_path)
    worker = start_worker_process(module, *start, 2.0, name)
    replacement = None
    try:
        # Importing the library and starting the worker is slow on a loaded machine.
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
        replacement = start_worker_process(module, *start, 0.1, name)
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
