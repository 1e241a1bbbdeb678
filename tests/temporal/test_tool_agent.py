"""The ToolAgent example end to end: tools as activities, one turn per task, and a worker
killed in the middle of a tool call."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError
from temporalio.client import WorkflowFailureError, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from activities.tools import CALCULATOR, LOOKUP, example_tools
from statecore.agent_session import WORKFLOWS
from statecore.contract._activities import ToolBinding
from statecore.core._errors import InvalidIdentifierError, InvalidInputError, MigrationError
from statecore.core._models import FlowCheckpoint, OrchestrationState, SessionRef, StoredMessage
from statecore.store import open_store
from statecore.store._base import StateStore
from statecore.temporal._devserver import DevServer
from statecore.temporal._plugin import workflow_runner
from tests.dbs import fresh_database
from tests.temporal.conftest import HISTORIES, Env
from tests.temporal.tool_agent_worker import SLOW
from workflows import EXAMPLE_WORKFLOWS
from workflows.tool_agent import (
    ANSWERED,
    ToolAgent,
    ToolAgentInput,
    ToolAgentResult,
    tool_agent_workflow_id,
)

ROOT = Path(__file__).resolve().parents[2]
SESSION = "work"


@pytest.fixture
async def agent_env(env_factory: Callable[..., Any]) -> AsyncIterator[Env]:
    async with (
        fresh_database("sqlite", "tool-agent") as url,
        env_factory(
            url, extra_workflows=EXAMPLE_WORKFLOWS, activity_factories=[example_tools]
        ) as env,
    ):
        yield env


def task_input(env: Env, task_id: str, task: str, *follow_ups: str, **kw: Any) -> ToolAgentInput:
    return ToolAgentInput(
        agent_id=env.agent,
        session_id=SESSION,
        task_id=task_id,
        task=task,
        follow_ups=list(follow_ups),
        tools=kw.pop("tools", [CALCULATOR, LOOKUP]),
        **kw,
    )


async def run_task(env: Env, input: ToolAgentInput, *, task_queue: str | None = None) -> Any:
    return await env.client.execute_workflow(
        ToolAgent.run,
        input,
        id=tool_agent_workflow_id(input.agent_id, input.session_id, input.task_id),
        task_queue=task_queue or env.task_queue,
        result_type=ToolAgentResult,
    )


async def store_once_migrated(url: str, *, within: float = 30.0) -> StateStore:
    """The worker migrates its database in the background after it starts; a test that
    writes before the first task waits for the schema rather than racing the migration."""
    for _ in range(int(within * 10)):
        try:
            return await open_store(url)
        except (MigrationError, OperationalError):
            await asyncio.sleep(0.1)
    raise AssertionError(f"the worker did not migrate {url} within {within}s")


@dataclass
class Stored:
    messages: list[StoredMessage]
    flow: list[FlowCheckpoint]
    orchestration: OrchestrationState | None


async def stored(url: str, agent: str, task_id: str) -> Stored:
    ref = SessionRef(agent_id=agent, session_id=SESSION)
    store = await open_store(url)
    try:
        async with store.transaction() as tx:
            return Stored(
                messages=await tx.conversation.messages(ref),
                flow=await tx.flow.history(ref, f"tool-agent.{task_id}"),
                orchestration=await tx.orchestration.get(ref),
            )
    finally:
        await store.close()


def assert_each_message_once(rows: Sequence[StoredMessage], task_id: str, roles: list[str]) -> None:
    assert [m.role for m in rows] == roles
    assert [m.seq for m in rows] == list(range(1, len(rows) + 1))
    assert [m.index for m in rows] == list(range(len(rows)))
    assert {m.turn_id for m in rows} == {task_id}
    calls = [c.id for m in rows for c in m.tool_calls]
    answers = [m.tool_call_id for m in rows if m.role == "tool"]
    assert len(set(calls)) == len(calls)
    assert answers == calls  # every call answered once, in order


def calc(expression: str) -> str:
    return f'use tool calculator {{"expression": "{expression}"}}'


async def test_a_task_that_needs_a_tool_is_answered_with_its_result(agent_env: Env) -> None:
    result = await run_task(agent_env, task_input(agent_env, "t1", calc("6*7")))
    assert "Tool calculator returned: 6*7 = 42" in result.answer
    assert (result.turn, result.tool_calls, result.tools_used) == (1, 1, ["calculator"])
    assert not result.duplicate

    sql = await stored(agent_env.database_url, agent_env.agent, "t1")
    rows = sql.messages
    assert_each_message_once(rows, "t1", ["user", "assistant", "tool", "assistant"])
    assert rows[0].content == calc("6*7")
    assert [c.name for c in rows[1].tool_calls] == ["calculator"]
    assert rows[2].content == "6*7 = 42"
    assert rows[3].content == result.answer
    assert [(c.version, c.step) for c in sql.flow] == [(1, "tool.calculator"), (2, ANSWERED)]
    assert sql.flow[0].data["arguments"] == '{"expression":"6*7"}'
    assert sql.flow[1].data["answer"] == result.answer
    assert sql.orchestration is not None
    assert "calculator" in sql.orchestration.recently_used_tools
    assert sql.orchestration.active_step == ANSWERED

    handle = agent_env.client.get_workflow_handle(
        tool_agent_workflow_id(agent_env.agent, SESSION, "t1")
    )
    progress = await handle.query(ToolAgent.progress)
    assert (progress.step, progress.tool_calls, progress.tools_used) == (
        ANSWERED,
        1,
        ["calculator"],
    )


async def test_two_tools_in_one_task_calculator_then_kv_lookup(agent_env: Env) -> None:
    ref = SessionRef(agent_id=agent_env.agent, session_id=SESSION)
    store = await store_once_migrated(agent_env.database_url)
    try:
        async with store.transaction() as tx:
            await tx.kv.put(ref.kv_scope, "facts", "capital", {"city": "Paris"})
    finally:
        await store.close()

    result = await run_task(
        agent_env,
        task_input(agent_env, "t2", calc("2**10"), 'now use tool lookup {"key": "capital"}'),
    )
    assert result.tools_used == ["calculator", "lookup"]
    assert 'Tool lookup returned: {"city": "Paris"}' in result.answer

    sql = await stored(agent_env.database_url, agent_env.agent, "t2")
    roles = ["user", "assistant", "tool", "assistant"] * 2
    assert_each_message_once(sql.messages, "t2", roles)
    assert [m.content for m in sql.messages if m.role == "tool"] == [
        "2**10 = 1024",
        '{"city": "Paris"}',
    ]
    assert "Tool calculator returned: 2**10 = 1024" in sql.messages[3].content
    assert [(c.version, c.step) for c in sql.flow] == [
        (1, "tool.calculator"),
        (2, "tool.lookup"),
        (3, ANSWERED),
    ]
    assert sql.orchestration is not None
    assert sql.orchestration.recently_used_tools[-2:] == ["calculator", "lookup"]


async def test_a_finished_task_started_again_runs_nothing_and_stores_nothing(
    agent_env: Env,
) -> None:
    first = await run_task(agent_env, task_input(agent_env, "t3", calc("1+1")))
    before = await stored(agent_env.database_url, agent_env.agent, "t3")
    again = await run_task(agent_env, task_input(agent_env, "t3", calc("1+1")))
    assert again.duplicate
    assert again.model_dump(exclude={"duplicate"}) == first.model_dump(exclude={"duplicate"})
    after = await stored(agent_env.database_url, agent_env.agent, "t3")
    assert after.messages == before.messages
    assert after.flow == before.flow


async def test_a_failing_tool_is_reported_to_the_model_and_the_task_still_ends(
    agent_env: Env,
) -> None:
    result = await run_task(agent_env, task_input(agent_env, "t4", calc("__import__('os')")))
    assert "Tool calculator returned: error: only numbers" in result.answer
    sql = await stored(agent_env.database_url, agent_env.agent, "t4")
    assert_each_message_once(sql.messages, "t4", ["user", "assistant", "tool", "assistant"])
    assert sql.messages[2].content.startswith("error: only numbers")


async def test_too_many_tool_calls_fail_the_task_and_store_nothing(agent_env: Env) -> None:
    input = task_input(agent_env, "t5", calc("1+1"), calc("2+2"), max_tool_calls=1)
    with pytest.raises(WorkflowFailureError) as failure:
        await run_task(agent_env, input)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "ToolCallLimit"
    sql = await stored(agent_env.database_url, agent_env.agent, "t5")
    assert sql.messages == [] and sql.flow == []


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"task_id": "a/b"}, InvalidIdentifierError),
        ({"task_id": "x" * 101}, InvalidIdentifierError),
        ({"task": "  "}, InvalidInputError),
        ({"follow_ups": [""]}, InvalidInputError),
        ({"tools": [CALCULATOR, CALCULATOR]}, InvalidIdentifierError),
    ],
)
def test_bad_input_is_refused_before_anything_starts(change: dict, error: type) -> None:
    fields = {"agent_id": "a", "session_id": "s", "task_id": "t", "task": "x", **change}
    with pytest.raises(error):
        ToolAgentInput(**fields)


def test_tool_names_follow_the_model_alphabet_and_the_example_is_not_registered_by_default() -> (
    None
):
    with pytest.raises(InvalidInputError):
        ToolBinding(name="statecore.example.calculator", activity="statecore.example.calculator")
    assert ToolAgent not in WORKFLOWS and ToolAgent in EXAMPLE_WORKFLOWS


async def test_committed_history_replays() -> None:
    """A change that would break running tasks fails here (re-record with
    ``python -m tests.temporal.record_tool_agent_history``; guard with workflow.patched)."""
    path = HISTORIES / "examples" / "tool-agent-run1.json"
    history = WorkflowHistory.from_json("replay-tool-agent", json.loads(path.read_text()))
    replayer = Replayer(
        workflows=EXAMPLE_WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert kinds.count("activity_task_completed_event_attributes") == 8  # 6 model, 2 tools
    assert kinds.count("activity_task_failed_event_attributes") == 1  # 1/0, not retried


# --- a worker killed in the middle of a tool ----------------------------------------------------


def start_worker(address: str, queue: str, url: str, markers: Path) -> subprocess.Popen:
    (markers / "worker-ready").unlink(missing_ok=True)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.temporal.tool_agent_worker",
            address,
            queue,
            url,
            str(markers),
        ],
        cwd=ROOT,
        start_new_session=True,  # its own process group, so killpg reaches only it
    )


async def wait_for_line(path: Path, line: str, *, within: float = 60.0) -> None:
    for _ in range(int(within * 20)):
        if path.exists() and line in path.read_text().splitlines():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} has no line {line!r} after {within}s")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def slow(label: str, seconds: float) -> str:
    return f'use tool slow {{"label": "{label}", "seconds": {seconds}}}'


@pytest.mark.slow
async def test_worker_killed_during_a_tool_resumes_without_repeating_finished_steps(
    agent_env: Env, dev_server: DevServer, tmp_path: Path
) -> None:
    queue = agent_env.task_queue + "-proc"
    url = agent_env.database_url
    worker = start_worker(dev_server.address, queue, url, tmp_path)
    replacement = None
    try:
        await wait_for_line(tmp_path / "worker-ready", "ready")
        input = task_input(
            agent_env, "crash", slow("a", 0.1), slow("b", 4), calc("3*3"), tools=[SLOW, CALCULATOR]
        )
        handle = await agent_env.client.start_workflow(
            ToolAgent.run,
            input,
            id=tool_agent_workflow_id(input.agent_id, input.session_id, input.task_id),
            task_queue=queue,
            result_type=ToolAgentResult,
        )
        await wait_for_line(tmp_path / "tool-log", "start b 1")  # step b is running now
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        progress = (tmp_path / "tool-log").read_text().splitlines()
        assert progress == ["start a 1", "done a", "start b 1"]

        replacement = start_worker(dev_server.address, queue, url, tmp_path)
        result = await asyncio.wait_for(handle.result(), timeout=120)
    finally:
        stop(worker)
        stop(replacement)

    # Step a ran once; step b, interrupted, ran again (attempt 2); nothing else repeated.
    assert (tmp_path / "tool-log").read_text().splitlines() == [
        "start a 1",
        "done a",
        "start b 1",
        "start b 2",
        "done b",
    ]
    # Six model calls: a tool call and an answer per instruction, none made twice.
    model_calls = (tmp_path / "model-calls").read_text().splitlines()
    assert len(model_calls) == 6, model_calls
    assert "Tool calculator returned: 3*3 = 9" in result.answer
    assert result.tools_used == ["slow", "calculator"] and result.tool_calls == 3

    sql = await stored(url, agent_env.agent, "crash")
    assert_each_message_once(sql.messages, "crash", ["user", "assistant", "tool", "assistant"] * 3)
    assert [m.content for m in sql.messages if m.role == "tool"] == [
        "step a finished",
        "step b finished",
        "3*3 = 9",
    ]
    assert [(c.version, c.step) for c in sql.flow] == [
        (1, "tool.slow"),
        (2, "tool.slow"),
        (3, "tool.calculator"),
        (4, ANSWERED),
    ]
    assert sql.orchestration is not None
    assert sql.orchestration.recently_used_tools[-2:] == ["slow", "calculator"]
