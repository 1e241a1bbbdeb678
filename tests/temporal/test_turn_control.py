"""A workflow on the turn API resets and compacts its own session (as the operator contract
does), and statecore's errors come back as their classes in workflow code and in a client,
on a real dev server."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError

from statecore import SessionRef, open_store, read_events
from statecore.contract._session import CompactInput, ResetInput
from statecore.errors import (
    ERRORS_BY_CODE,
    ResetRefusedError,
    SessionStateError,
    UnknownStoreError,
    from_failure,
)
from tests.dbs import fresh_database
from tests.temporal.control_workflow import ControlledAgent, raise_code

pytestmark = pytest.mark.temporal

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mariadb", marks=pytest.mark.mariadb),
]


async def _start(client: Client, queue: str, ref: SessionRef) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        ControlledAgent.run, ref, id=f"controlled-{uuid.uuid4().hex[:10]}", task_queue=queue
    )


async def _refused(handle: WorkflowHandle[Any, Any], update: Any, arg: Any) -> Exception:
    with pytest.raises(WorkflowUpdateFailedError) as caught:
        await handle.execute_update(update, arg)
    error = from_failure(caught.value)
    assert error is not None, (caught.value, caught.value.cause)
    return error


@pytest.mark.parametrize("dialect", BACKENDS)
async def test_a_turn_api_workflow_resets_and_compacts_its_own_session(
    dialect: str, env_factory: Callable[..., Any]
) -> None:
    async with (
        fresh_database(dialect, "control") as url,
        env_factory(url, extra_workflows=[ControlledAgent]) as env,
    ):
        ref = SessionRef(namespace="ctl", agent_id=env.agent, session_id="s1")
        handle = await _start(env.client, env.task_queue, ref)
        for n in range(1, 4):
            assert await handle.execute_update(ControlledAgent.note, f"t{n}") == n

        compacted = await handle.execute_update(
            ControlledAgent.compact, CompactInput(strategy="recent", max_messages=2)
        )
        assert compacted.compacted and compacted.operation == "compact"
        conversation = compacted.store("conversation")
        assert conversation is not None
        assert conversation.metadata["window_start_seq"] == 5  # six messages, two kept

        # Refused as the operator contract refuses them, with the class a client catches.
        nothing_named = await _refused(handle, ControlledAgent.reset_stores, [])
        assert isinstance(nothing_named, ResetRefusedError)
        refused = await _refused(handle, ControlledAgent.reset_stores, ["kvv"])
        assert isinstance(refused, UnknownStoreError)
        refused_inside = await handle.execute_update(ControlledAgent.reset_inside_a_turn, "t9")
        assert refused_inside == SessionStateError.__name__  # and that turn committed: 4

        cleared = await handle.execute_update(
            ControlledAgent.reset, ResetInput(stores=["conversation"])
        )
        assert cleared.cleared == ["conversation"]
        # The turn numbering goes on after the reset; the next turn commits as usual.
        assert await handle.execute_update(ControlledAgent.note, "t5") == 5

        store = await open_store(url)
        try:
            kinds = [e.kind for e in await read_events(store, "ctl")]
        finally:
            await store.close()
        # One event per committed change; the refusals recorded nothing.
        assert kinds == ["messages"] * 3 + ["compaction", "messages", "reset", "messages"]
        await handle.terminate("test done")


async def test_every_code_comes_back_as_its_class_in_workflow_code_and_in_a_client(
    env_factory: Callable[..., Any],
) -> None:
    codes = sorted(ERRORS_BY_CODE)
    async with (
        fresh_database("sqlite", "errors") as url,
        env_factory(url, extra_workflows=[ControlledAgent], extra_activities=[raise_code]) as env,
    ):
        ref = SessionRef(namespace="errs", agent_id=env.agent, session_id="s1")
        handle = await _start(env.client, env.task_queue, ref)
        # Workflow code: the activity's failure (an ActivityError) back to its class.
        seen = await handle.execute_update(ControlledAgent.classify, codes)
        assert [(c.code, c.class_name) for c in seen] == [
            (code, ERRORS_BY_CODE[code].__name__) for code in codes
        ]
        assert all(c.message == f"refused with {c.code}" for c in seen)
        assert all(c.details == {"code_seen": c.code} for c in seen)
        # A client: the update's failure, caused by the activity's, back to its class.
        for code in codes:
            error = await _refused(handle, ControlledAgent.through_activity, code)
            assert type(error) is ERRORS_BY_CODE[code], code
            assert error.message == f"refused with {code}"  # type: ignore[attr-defined]
        await handle.terminate("test done")
