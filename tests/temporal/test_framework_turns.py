"""What every agent framework's turns promise, on a real Temporal dev server, once for each of
OpenAI Agents SDK agents, LangGraph graphs, Google ADK agents and Pydantic AI agents; the
killed-worker scenario also for statecore's own model-backed session.

Each scenario runs against a ``Framework``: how to register its agent with the plugin (the kill
test's worker process, tests/temporal/framework_worker_process.py, builds them alike), and
what its deterministic model (or graph nodes) answers where the frameworks' answers differ.
The frameworks, the plugin, the worker, the workflow and the database are the real ones; only
the models are rules. What is specific to one framework stays in its own file
(test_openai_agent_turns.py, test_langgraph_turns.py, test_adk_agent_turns.py,
test_pydantic_ai_turns.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from statecore.contract._session import workflow_id_for
from statecore.core._errors import AgentRunError, SessionPausedError, UnknownAgentError
from statecore.core._models import SessionRef, StoredMessage
from statecore.integrations.google_adk import StatecoreSessionService
from statecore.integrations.langgraph import StatecoreSaver
from statecore.integrations.langgraph._turns import thread_id_for
from statecore.integrations.pydantic_ai import PydanticAIAgentTurn
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.integrations.google_adk import adk_agents
from tests.integrations.langgraph_graphs import build_graph
from tests.integrations.openai_agents import agents_fixture as openai_agents
from tests.integrations.pydantic_ai import agents_fixture as pydantic_ai_agents
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

Check = Callable[[str], None]


def reply_is(expected: str) -> Check:
    def check(reply: str) -> None:
        assert reply == expected, reply

    return check


def reply_is_not(unexpected: str) -> Check:
    def check(reply: str) -> None:
        assert reply != unexpected, reply

    return check


def reply_lacks(text: str) -> Check:
    def check(reply: str) -> None:
        assert text not in reply, reply

    return check


def reply_has(text: str) -> Check:
    def check(reply: str) -> None:
        assert text in reply, reply

    return check


async def no_checkpoints(url: str, agent: str, session: str) -> int:
    return 0


async def langgraph_checkpoints(url: str, agent: str, session: str) -> int:
    """The checkpoints StatecoreSaver holds for the session's thread."""
    store = await open_store(url)
    try:
        saver = StatecoreSaver.from_store(store)
        ref = SessionRef(agent_id=agent, session_id=session)
        config = {"configurable": {"thread_id": thread_id_for(ref)}}
        return len([c async for c in saver.alist(config)])
    finally:
        await store.close()


async def adk_events(url: str, agent: str, session: str) -> int:
    """The events ADK's own session service reads back for the session."""
    service = StatecoreSessionService(database_url=url)
    try:
        read = await service.get_session(app_name=agent, user_id="user", session_id=session)
    finally:
        await service.close()
    assert read is not None
    return len(read.events)


@dataclass(frozen=True)
class KillCase:
    """A worker SIGKILLed inside a turn's model call (or graph node), for one kind of session."""

    id: str
    #: The agent name's prefix (ADK app names are identifiers: no dash).
    prefix: str
    #: The module run as the worker (tests/temporal/*worker_process.py) and its arguments after
    #: the agent name, and the file under its marker directory it appends a line to per model
    #: call or node run.
    worker_process: str
    worker_args: tuple[str, ...]
    calls_file: str
    #: The first worker's model (or tool node) delay, and the model heartbeat.
    delay: float
    heartbeat: int
    #: The turn before the kill and the killed turn: message, its reply's check, and the roles
    #: of the messages it stores.
    first: tuple[str, Check, tuple[str, ...]]
    second: tuple[str, Check, tuple[str, ...]]
    #: Lines in the calls file once the killed turn is inside its model call (or node).
    under_way: int
    #: The model calls (or the node runs, in order) once the killed turn has finished on the
    #: replacement.
    calls: int | tuple[str, ...]


@dataclass(frozen=True)
class Framework:
    """One framework's agent and what its rules answer, for the scenarios below."""

    id: str
    #: The agent name's prefix (ADK app names are identifiers: no dash).
    prefix: str
    #: ``{name: agent}`` for ``StatecorePlugin(agents=...)``; every model call (or graph node
    #: run) appends a line to the file given.
    agents: Callable[[str, Path], dict[str, Any]]
    #: The file under the marker directory its agent (as built here, or in the kill test's
    #: tests/temporal/framework_worker_process.py) appends a line to per model call or node run.
    calls_file: str
    #: The model name a session asks for that the worker does not have.
    unknown: str
    #: A message a fresh session is answered, and that answer.
    greeting: tuple[str, str]
    #: Framework state kept beside the messages (LangGraph's checkpoints), counted.
    checkpoints: Callable[[str, str, str], Awaitable[int]]
    #: A message that recalls the conversation, its answer when there is none, and its answer
    #: after one "weather in Oslo" turn.
    recall: tuple[str, str]
    recall_after_oslo: str
    #: How many messages the framework's own API reads back for a session (ADK's
    #: StatecoreSessionService), where it has one to check.
    own_reading: Callable[[str, str, str], Awaitable[int]] | None
    #: Whether the operator scenario adds a hint and compacts, and what ``recall`` is answered
    #: after the operator's steps (on the compacted window, where it compacts).
    hints: bool
    compacts: bool
    after_operations: Check
    #: The tool-raising scenario: the turn before it, the error's words, and the turn after it
    #: with its answer (the failed turn's message is not in what the run sees).
    before_failure: str
    failure: str
    after_failure: tuple[str, str]
    #: History-size scenario: how many weather turns, and the turns whose added bytes are
    #: compared (the first turn carries the workflow's start, the second the once-a-run marker
    #: of the StatecoreTurn search attribute, upserted on the first turn and every 10th).
    flat_turns: int
    flat_compared: tuple[int, ...]
    #: The roles a weather turn's messages are stored with (ADK stores its tool's response as
    #: an event of the agent).
    weather_roles: tuple[str, ...]
    #: Its worker SIGKILLed in a weather turn: ``KillCase``'s delay, heartbeat, first turn and
    #: calls.
    kill_delay: float
    heartbeat: int
    kill_first: tuple[str, Check, tuple[str, ...]]
    kill_calls: int | tuple[str, ...]

    @property
    def kill(self) -> KillCase:
        weather = ("weather in Rome", reply_is("weather: sunny in Rome"), self.weather_roles)
        return KillCase(
            id=self.id,
            prefix=self.prefix,
            worker_process="tests.temporal.framework_worker_process",
            worker_args=(self.id,),
            calls_file=self.calls_file,
            delay=self.kill_delay,
            heartbeat=self.heartbeat,
            first=self.kill_first,
            second=weather,
            under_way=3,  # the first turn's 2 model calls (or nodes), then the killed turn's
            calls=self.kill_calls,
        )


def openai_agent(name: str, calls: Path) -> dict[str, Any]:
    return {name: openai_agents.build_agent(openai_agents.RuleModel(calls_file=calls))}


def langgraph_graph(name: str, calls: Path) -> dict[str, Any]:
    return {name: build_graph(calls).compile()}


def adk_agent(name: str, calls: Path) -> dict[str, Any]:
    return {name: adk_agents.build_agent(calls_file=str(calls))}


def pydantic_ai_agent(name: str, calls: Path) -> dict[str, Any]:
    agent = pydantic_ai_agents.build_desk_agent(calls)
    return {name: PydanticAIAgentTurn(agent, deps=pydantic_ai_agents.Forecasts(), name=name)}


WEATHER_ROLES = ("user", "assistant", "tool", "assistant")
ADK_WEATHER_ROLES = ("user", "assistant", "assistant", "assistant")

AGENT_ANSWERS: dict[str, Any] = {
    "calls_file": "model-calls",
    "unknown": "no-such-agent",
    "greeting": ("again", "echo: again"),
    "checkpoints": no_checkpoints,
    "recall": ("what did I say", "nothing yet"),
    "recall_after_oslo": "weather in Oslo",
    "own_reading": None,
    "compacts": True,
    "before_failure": "hello",
    "failure": "the tool exploded",
    "after_failure": ("what did I say", "hello"),
    "flat_turns": 6,
    "flat_compared": (3, 4, 5, 6),
    "kill_delay": 2.0,
    "heartbeat": 2,
    "kill_first": ("weather in Oslo", reply_is("weather: sunny in Oslo"), WEATHER_ROLES),
    # The first turn: 2 calls; the killed one: 1 killed with its worker, 2 on the replacement.
    "kill_calls": 5,
    "weather_roles": WEATHER_ROLES,
}

OPENAI = Framework(
    id="openai-agents",
    prefix="desk-",
    agents=openai_agent,
    hints=True,
    # The oldest user message is out of the compacted window.
    after_operations=reply_lacks("weather in Quito"),
    **AGENT_ANSWERS,
)

LANGGRAPH = Framework(
    id="langgraph",
    prefix="graph-",
    agents=langgraph_graph,
    calls_file="node-calls",
    unknown="no-such-graph",
    greeting=("hi", "you said: hi (1 user messages so far)"),
    checkpoints=langgraph_checkpoints,
    # A reset conversation starts the graph's thread afresh too.
    recall=("hello", "you said: hello (1 user messages so far)"),
    recall_after_oslo="you said: hello (2 user messages so far)",
    own_reading=None,
    # The graph's state is its thread's checkpoints, not the conversation's window.
    hints=False,
    compacts=False,
    after_operations=reply_is("you said: hello (2 user messages so far)"),
    before_failure="hello",
    failure="the node exploded",
    # The failed turn's message never reached the graph state the next turn runs on.
    after_failure=("again", "you said: again (2 user messages so far)"),
    # Turns 3 and 19 both skip the StatecoreTurn upsert.
    flat_turns=20,
    flat_compared=(3, 19),
    # The tool node sleeps: the kill lands in k2's tool node, after its assistant step's
    # checkpoint.
    kill_delay=30.0,
    heartbeat=2,
    kill_first=(
        "hello",
        reply_is("you said: hello (1 user messages so far)"),
        ("user", "assistant"),
    ),
    # The retried turn resumed at the tool node: the assistant step that finished before the
    # kill did not run again.
    kill_calls=("assistant", "assistant", "tools", "tools", "assistant"),
    weather_roles=WEATHER_ROLES,
)

ADK = Framework(
    **{
        **AGENT_ANSWERS,
        # A state-writing turn before the one that fails.
        "before_failure": "remember tea",
        "after_failure": ("what did I say", "remember tea"),
        # Each model call of the first worker takes 5 s, so the kill lands inside k2's first
        # call; heartbeats are due every 6 s, so a loaded machine's late beat is no timeout.
        "kill_delay": 5.0,
        "heartbeat": 6,
        "weather_roles": ADK_WEATHER_ROLES,
        "kill_first": ("weather in Oslo", reply_is("weather: sunny in Oslo"), ADK_WEATHER_ROLES),
        "own_reading": adk_events,
    },
    id="google-adk",
    prefix="desk_",
    agents=adk_agent,
    hints=True,
    # The run after compaction starts from the window: the first user message is out.
    after_operations=reply_is("nothing yet"),
)

PYDANTIC_AI = Framework(
    id="pydantic-ai",
    prefix="pdesk-",
    agents=pydantic_ai_agent,
    hints=True,
    # The oldest user message is out of the compacted window.
    after_operations=reply_is_not("weather in Quito"),
    **AGENT_ANSWERS,
)


#: statecore's own model-backed session: tests/temporal/worker_process.py's offline model
#: behind a delay, one call per turn (its worker serves any agent id, so ignores the name).
MODEL_SESSION = KillCase(
    id="model-session",
    prefix="agent-",
    worker_process="tests.temporal.worker_process",
    worker_args=(),
    calls_file="model-calls",
    delay=3.0,
    heartbeat=2,
    first=("first", reply_has("user messages: 1,"), ("user", "assistant")),
    second=("second", reply_has("user messages: 2,"), ("user", "assistant")),
    under_way=2,
    # k1, k2 (killed), k2 again on the new worker.
    calls=3,
)

FRAMEWORKS = [
    pytest.param(OPENAI, id=OPENAI.id),
    pytest.param(LANGGRAPH, id=LANGGRAPH.id),
    pytest.param(ADK, id=ADK.id, marks=pytest.mark.timeout(300)),
    pytest.param(PYDANTIC_AI, id=PYDANTIC_AI.id),
]


class FrameworkEnv:
    """A worker whose plugin has the framework's agent registered under ``name``."""

    def __init__(self, env: Env, f: Framework, name: str, calls: Path) -> None:
        self.env, self.f, self.name, self.calls = env, f, name, calls
        self.sessions = env.sessions

    def model_calls(self) -> int:
        return len(self.calls.read_text().splitlines()) if self.calls.exists() else 0

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


@pytest.fixture(params=FRAMEWORKS)
def framework(request: pytest.FixtureRequest) -> Framework:
    return request.param  # type: ignore[no-any-return]


def new_name(f: Framework | KillCase) -> str:
    # Workflow ids are global on the shared dev server: a fresh agent name per test.
    return f"{f.prefix}{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def fw(
    framework: Framework, dev_server: DevServer, tmp_path: Path
) -> AsyncIterator[FrameworkEnv]:
    name, calls = new_name(framework), tmp_path / framework.calls_file
    async with (
        fresh_database("sqlite", "fwturns") as url,
        running_env(dev_server, url, agents=framework.agents(name, calls)) as env,
    ):
        yield FrameworkEnv(env, framework, name, calls)


async def test_an_unknown_agent_name_is_refused_and_the_session_goes_on(
    fw: FrameworkEnv,
) -> None:
    a, f = fw, fw.f
    with pytest.raises(UnknownAgentError, match=f.unknown):
        await a.sessions.send(a.name, "s5", "hi", turn_id="u1", model=f.unknown)
    assert await a.log("s5") == []
    assert await f.checkpoints(a.env.database_url, a.name, "s5") == 0
    # The session that refused turn opened has ended with it (its model would refuse every
    # turn), its state kept; the next send opens it again on the default agent and is answered.
    report = await a.sessions.describe(a.name, "s5")
    assert report.checkpoint is not None and report.checkpoint.status == "closed"
    assert report.checkpoint.turn == 0
    message, answer = f.greeting
    again = await a.sessions.send(a.name, "s5", message, turn_id="u3")
    assert again.turn == 1 and again.reply.content == answer
    # The worker's other sessions are untouched.
    ok = await a.sessions.send(a.name, "s5-ok", message, turn_id="u2")
    assert ok.reply.content == answer and ok.turn == 1


async def test_the_operator_contract_pause_describe_compact_reset(fw: FrameworkEnv) -> None:
    a, f = fw, fw.f
    s = a.sessions
    await s.send(a.name, "s6", "weather in Quito", turn_id="o1")
    await s.pause(a.name, "s6", "maintenance")
    await until_status(lambda: session_status(s, a.name, "s6"), "paused")
    with pytest.raises(SessionPausedError):
        await s.send(a.name, "s6", "hello", turn_id="o2")
    await s.resume(a.name, "s6")
    await until_status(lambda: session_status(s, a.name, "s6"), "active")
    if f.hints:
        await s.add_hint(a.name, "s6", "Answer in French.")
    report = await s.describe(a.name, "s6")
    conversation = report.store("conversation")
    assert conversation is not None and conversation.items == 4
    assert report.checkpoint is not None and report.checkpoint.turn == 1
    if f.compacts:
        compacted = await s.compact(a.name, "s6", strategy="recent", max_messages=2)
        assert "conversation" in compacted.compacted
    message, empty_answer = f.recall
    said = await s.send(a.name, "s6", message, turn_id="o3")
    f.after_operations(said.reply.content)
    cleared = await s.reset(a.name, "s6", ["conversation"])
    assert "conversation" in cleared.cleared
    assert await a.log("s6") == []
    fresh = await s.send(a.name, "s6", message, turn_id="o4")
    assert fresh.reply.content == empty_answer


async def test_history_bytes_per_turn_stay_flat(fw: FrameworkEnv) -> None:
    """The conversation (or the graph's state) lives in SQL: a turn's history carries its own
    message and reply, never the earlier ones, so every turn adds about the same bytes."""
    a, f = fw, fw.f
    handle = a.env.client.get_workflow_handle(workflow_id_for(a.name, "flat"))
    sizes, marker_counts = [], []
    for n in range(1, f.flat_turns + 1):
        await a.sessions.send(a.name, "flat", f"weather in City{n:02d}", turn_id=f"f{n:02d}")
        size, mentions = await history_size_and_mentions(handle, b"sunny in City01")
        sizes.append(size)
        marker_counts.append(mentions)
    per_turn = [sizes[n - 1] - sizes[n - 2] for n in f.flat_compared]
    # Only counters grow (event ids, the turn number, token totals gain a digit or a varint
    # byte); a turn that carried the earlier messages would add hundreds of bytes per turn.
    assert max(per_turn) - min(per_turn) <= 64, per_turn
    # The first turn's tool output was never carried again by a later turn.
    assert marker_counts[0] >= 1 and set(marker_counts) == {marker_counts[0]}
    assert len(await a.log("flat")) == 4 * f.flat_turns


async def test_the_same_turn_id_answers_from_its_record_without_running_the_agent(
    fw: FrameworkEnv,
) -> None:
    a = fw
    first = await a.sessions.send(a.name, "s3", "weather in Lima", turn_id="d1")
    calls = a.model_calls()
    again = await a.sessions.send(a.name, "s3", "weather in Lima", turn_id="d1")
    # The workflow answers a repeated update id with the turn's first result.
    assert again == first
    assert a.model_calls() == calls
    log = await a.log("s3")
    assert len(log) == 4 and tuple(m.role for m in log) == a.f.weather_roles


async def test_a_tool_that_raises_stores_nothing_and_the_session_goes_on(
    fw: FrameworkEnv,
) -> None:
    a, f = fw, fw.f
    await a.sessions.send(a.name, "s4", f.before_failure, turn_id="e1")
    before = await a.log("s4")
    with pytest.raises(AgentRunError, match=f.failure):
        await a.sessions.send(a.name, "s4", "explode", turn_id="e2")
    assert await a.log("s4") == before
    message, answer = f.after_failure
    after = await a.sessions.send(a.name, "s4", message, turn_id="e3")
    assert after.reply.content == answer and after.turn == 2


async def test_search_attributes_migrate_close_and_the_cli(
    framework: Framework, dev_server: DevServer, tmp_path: Path
) -> None:
    """The rest of the operator contract on a framework's session: it is found through its
    search attributes, the `statecore` CLI describes it, it moves to another task queue and
    goes on there, and closes; closing keeps its messages in SQL."""
    f = framework
    name, calls = new_name(f), tmp_path / f.calls_file
    async with fresh_database("sqlite", "fwops") as url:
        async with running_env(dev_server, url, agents=f.agents(name, calls)) as first:
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
        # The first worker is gone; only a worker on the second queue can answer now.
        agents = f.agents(name, calls)
        async with running_env(dev_server, url, task_queue=second_queue, agents=agents) as second:
            moved = await second.sessions.send(name, "ops", f.recall[0], turn_id="q2")
            assert moved.turn == 2 and moved.reply.content == f.recall_after_oslo
            await second.sessions.close(name, "ops")
            await until_status(lambda: session_status(second.sessions, name, "ops"), "closed")
        # Closing kept the state: both turns' messages are still in SQL.
        log = await sql_messages(url, name, "ops")
        assert {m.turn_id for m in log} == {"q1", "q2"} and len(log) == 6
        if f.own_reading is not None:
            assert await f.own_reading(url, name, "ops") == len(log)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(MODEL_SESSION, id=MODEL_SESSION.id),
        *(pytest.param(p.values[0].kill, id=p.id, marks=p.marks) for p in FRAMEWORKS),
    ],
)
async def test_worker_killed_mid_run_the_turn_is_stored_once(
    case: KillCase, env: Env, dev_server: DevServer, tmp_path: Path
) -> None:
    """The turn under way when its worker is SIGKILLed finishes on a replacement worker, is
    stored once, and answers from its record when sent again; the session goes on."""
    name = new_name(case)
    queue = f"{env.task_queue}-{case.id}"
    sessions = env.new_client()
    sessions.task_queue = queue
    calls = tmp_path / case.calls_file

    def start(delay: float) -> Any:
        return start_worker_process(
            case.worker_process,
            dev_server.address,
            queue,
            env.database_url,
            tmp_path,
            delay,
            name,
            *case.worker_args,
        )

    worker, replacement = start(case.delay), None
    beat = case.heartbeat
    try:
        # Importing the framework and starting the worker is slow on a loaded machine.
        await wait_for_file(tmp_path / "worker-ready", within=180)
        message, check_first, first_roles = case.first
        killed, check_killed, killed_roles = case.second
        first = await sessions.send(
            name, "kill", message, turn_id="k1", model_heartbeat_seconds=beat
        )
        check_first(first.reply.content)
        pending = asyncio.ensure_future(
            sessions.send(name, "kill", killed, turn_id="k2", model_heartbeat_seconds=beat)
        )
        # k2's model call (or node) is under way.
        await wait_for_file(calls, lines=case.under_way, within=60)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        replacement = start(0.1)
        second = await asyncio.wait_for(pending, timeout=120)
        assert second.turn == 2 and not second.duplicate
        check_killed(second.reply.content)
        ran = calls.read_text().splitlines()
        if isinstance(case.calls, int):
            assert len(ran) == case.calls, ran
        else:
            assert tuple(ran) == case.calls
        log = await sql_messages(env.database_url, name, "kill")
        assert [m.seq for m in log] == list(range(1, len(first_roles) + len(killed_roles) + 1))
        assert [m.turn_id for m in log] == ["k1"] * len(first_roles) + ["k2"] * len(killed_roles)
        assert tuple(m.role for m in log) == first_roles + killed_roles
        # Sending the committed turn again calls no model (runs no node).
        again = await sessions.send(name, "kill", killed, turn_id="k2")
        assert again.reply.content == second.reply.content
        assert len(calls.read_text().splitlines()) == len(ran)
        after = await sessions.send(name, "kill", message, turn_id="k3")
        assert after.turn == 3
    finally:
        kill_all(worker, replacement)
