"""The session's contract as operators meet it: handler descriptions and the static summary
the Web UI shows, resets that name what they clear, unknown signal and update names,
cancellation, and a start whose id or input is not a session's.

Operators' requests go through the real `temporal` CLI, programs' through the Python client.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from statecore.contract._session import (
    SIGNAL_DESCRIPTIONS,
    UPDATE_DESCRIPTIONS,
    session_summary,
    workflow_id_for,
)
from statecore.core._errors import ResetRefusedError, SessionClosedError, SessionNotFoundError
from statecore.temporal._devserver import DevServer
from tests.temporal.conftest import Env
from tests.temporal.test_operators import cli, signal, wait_for


async def metadata(env: Env, session: str) -> WorkflowMetadata:
    handle = env.sessions.handle(env.agent, session)
    meta: WorkflowMetadata = await handle.query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )
    return meta


async def test_every_handler_describes_its_input_and_the_session_has_a_summary(
    env: Env,
) -> None:
    await env.sessions.send(env.agent, "meta", "hello", turn_id="m1")
    definition = (await metadata(env, "meta")).definition
    signals = {d.name: d.description for d in definition.signal_definitions}
    updates = {d.name: d.description for d in definition.update_definitions}
    queries = {d.name: d.description for d in definition.query_definitions}
    assert set(SIGNAL_DESCRIPTIONS) <= set(signals)
    assert set(UPDATE_DESCRIPTIONS) <= set(updates)
    for name in [*SIGNAL_DESCRIPTIONS, *UPDATE_DESCRIPTIONS]:
        described = signals.get(name) or updates[name]
        assert "Input:" in described, name
    assert '{"all": true}' in signals["reset"] and '{"reason": str}' in signals["pause"]
    assert '"turn_id": str' in updates["send_message"]
    assert '{"include_data": bool}' in queries["describe"]
    # The dynamic handlers say what happens to any other name.
    assert "pause, resume, reset" in signals[""]
    assert "send_message" in updates[""]

    described = await env.sessions.handle(env.agent, "meta").describe()
    assert await described.static_summary() == session_summary(env.agent, "meta")
    details = await described.static_details()
    assert details is not None and "`reset`" in details and "Request Cancellation" in details


async def test_reset_must_name_what_it_clears(env: Env, dev_server: DevServer) -> None:
    sessions, agent = env.sessions, env.agent
    for i in range(2):
        await sessions.send(agent, "rs", f"hello {i}", turn_id=f"r{i}")
    # An empty dialog box: refused, recorded, nothing cleared.
    await signal(dev_server, agent, "rs", "reset", "{}")

    async def refused() -> bool:
        return bool((await sessions.describe(agent, "rs")).rejections)

    await wait_for(refused)
    report = await sessions.describe(agent, "rs")
    assert report.rejections[-1].code == "ResetRefused"
    assert '{"all": true}' in report.rejections[-1].message
    assert report.checkpoint.message_count == 4
    meta = await metadata(env, "rs")
    assert "last rejection: reset - ResetRefused" in meta.current_details

    # The update refuses the same way, typed; so does the client before sending.
    handle = sessions.handle(agent, "rs")
    for payload in ({}, {"stores": []}, {"stores": ["kv"], "all": True}):
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await handle.execute_update("reset_state", payload)
        assert isinstance(caught.value.cause, ApplicationError)
        assert caught.value.cause.type == "ResetRefused"
    with pytest.raises(ResetRefusedError):
        await sessions.reset(agent, "rs")
    assert (await sessions.describe(agent, "rs")).checkpoint.message_count == 4

    await signal(dev_server, agent, "rs", "reset", '{"all": true}')

    async def cleared() -> bool:
        return (await sessions.describe(agent, "rs")).checkpoint.message_count == 0

    await wait_for(cleared)
    assert (await sessions.describe(agent, "rs")).checkpoint.last_operation == "reset all stores"
    again = await sessions.send(agent, "rs", "after", turn_id="r9")
    report = await sessions.reset(agent, "rs", all_stores=True)
    assert report.cleared[0] == "conversation" and again.turn == 3


async def test_unknown_signal_and_update_names_are_refused_with_the_valid_names(
    env: Env, dev_server: DevServer
) -> None:
    sessions, agent = env.sessions, env.agent
    await sessions.send(agent, "typo", "hello", turn_id="t1")
    await signal(dev_server, agent, "typo", "Pause", '{"reason": "typo"}')

    async def recorded() -> bool:
        return bool((await sessions.describe(agent, "typo")).rejections)

    await wait_for(recorded)
    report = await sessions.describe(agent, "typo")
    rejection = report.rejections[-1]
    assert (rejection.operation, rejection.code) == ("Pause", "UnknownOperation")
    assert "pause, resume, reset, compact, add_hint, migrate, close" in rejection.message
    assert report.checkpoint.status == "active"  # the typo paused nothing
    meta = await metadata(env, "typo")
    assert "last rejection: Pause - UnknownOperation" in meta.current_details

    done = await cli(
        dev_server,
        "workflow",
        "update",
        "execute",
        "--workflow-id",
        workflow_id_for(agent, "typo"),
        "--name",
        "Describe_State",
        "--input",
        "{}",
    )
    assert done.returncode != 0
    assert "UnknownOperation" in done.stderr or "send_message" in done.stderr, done.stderr
    with pytest.raises(WorkflowUpdateFailedError) as caught:
        await sessions.handle(agent, "typo").execute_update("sendMessage", {"content": "x"})
    assert isinstance(caught.value.cause, ApplicationError)
    assert caught.value.cause.type == "UnknownOperation"
    assert "send_message, reset_state" in caught.value.cause.message
    assert (await sessions.send(agent, "typo", "still here", turn_id="t2")).turn == 2


async def test_cancellation_closes_the_session_and_keeps_its_state(env: Env) -> None:
    sessions, agent = env.sessions, env.agent
    for i in range(2):
        await sessions.send(agent, "cx", f"hello {i}", turn_id=f"c{i}")
    handle = sessions.handle(agent, "cx")
    await handle.cancel()
    report = await handle.result()  # completes (closed), it is not cancelled
    assert report["checkpoint"]["status"] == "closed"
    assert "cancellation requested" in report["checkpoint"]["last_operation"]
    assert await sessions.status(agent, "cx") == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
    described = await handle.describe()
    assert described.typed_search_attributes is not None
    status = {p.key.name: p.value for p in described.typed_search_attributes}
    assert status["StatecoreStatus"] == "closed"
    with pytest.raises(SessionNotFoundError):
        await sessions.pause(agent, "cx")  # the workflow is gone; ...
    # ... its state is not: the next message reopens the session where it stood.
    reopened = await sessions.send(agent, "cx", "back again", turn_id="c9")
    assert reopened.turn == 3 and "user messages: 3," in reopened.reply.content


async def test_cancellation_while_a_turn_runs_lets_the_turn_commit(env: Env) -> None:
    sessions, agent = env.sessions, env.agent
    await sessions.send(agent, "cx2", "hello", turn_id="a1")
    handle = sessions.handle(agent, "cx2")
    task = asyncio.ensure_future(sessions.send(agent, "cx2", "one more", turn_id="a2"))
    await asyncio.sleep(0.02)
    await handle.cancel()
    try:
        answered = await task
        assert answered.turn == 2
    except SessionClosedError:
        pass  # the cancellation arrived first: the turn was refused before it started
    report = await handle.result()
    count = report["checkpoint"]["message_count"]
    assert report["checkpoint"]["status"] == "closed" and count in (2, 4)  # whole turns only


async def _history_events(dev_server: DevServer, workflow_id: str) -> list[str]:
    done = await cli(
        dev_server, "workflow", "show", "--workflow-id", workflow_id, "--output", "json"
    )
    assert done.returncode == 0, done.stderr
    return [event["eventType"] for event in json.loads(done.stdout)["events"]]


@pytest.mark.parametrize(
    ("workflow_id", "payload", "says"),
    [
        # The case: a separator inside a part.
        ("agent-session:acme:b:c", {"agent_id": "acme:b", "session_id": "c"}, "agent_id"),
        # A valid input under another session's id.
        ("agent-session:other:one", {"agent_id": "mine", "session_id": "two"}, "is not the id"),
        # Not a session's input at all.
        ("agent-session:x:y", {"agent": "x"}, "agent_id"),
        ("agent-session:x:z", [1, 2], "not a session's"),
    ],
)
async def test_a_start_that_is_not_a_session_fails_at_once(
    env: Env, dev_server: DevServer, workflow_id: str, payload: object, says: str
) -> None:
    workflow_id = f"{workflow_id}-{env.agent}"
    done = await cli(
        dev_server,
        "workflow",
        "start",
        "--type",
        "AgentSession",
        "--task-queue",
        env.task_queue,
        "--workflow-id",
        workflow_id,
        "--input",
        json.dumps(payload),
    )
    assert done.returncode == 0, done.stderr
    handle = env.client.get_workflow_handle(workflow_id)
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "SessionIdentity" and cause.non_retryable
    assert says in cause.message
    events = await _history_events(dev_server, workflow_id)
    assert events[-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_FAILED"
    assert "EVENT_TYPE_WORKFLOW_TASK_FAILED" not in events  # no retry loop
    assert EventType.Name(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED) in events


async def test_a_client_start_under_another_sessions_id_fails_and_frees_the_id(env: Env) -> None:
    wrong_id = workflow_id_for(env.agent, "real")
    handle = await env.client.start_workflow(
        "AgentSession",
        {"agent_id": env.agent, "session_id": "impostor"},
        id=wrong_id,
        task_queue=env.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    assert isinstance(caught.value.cause, ApplicationError)
    assert caught.value.cause.type == "SessionIdentity"
    # The real session under that id starts afresh; nothing was stored for the impostor.
    assert (await env.sessions.send(env.agent, "real", "hi", turn_id="x1")).turn == 1
    assert (await env.sessions.send(env.agent, "impostor", "hi", turn_id="x1")).turn == 1
