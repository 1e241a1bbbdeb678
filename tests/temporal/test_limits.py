"""Limits at the real entry points: the Python client and the `temporal` CLI against a live
session. A refused request writes nothing to history, and the next turn is answered at once."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
)
from temporalio.common import RawValue, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from statecore.contract._session import WORKFLOW_TYPE, TurnResult
from statecore.core._errors import (
    ContentTooLargeError,
    ContextBudgetError,
    InvalidIdentifierError,
    PayloadTooLargeError,
    StatecoreError,
    StateTooLargeError,
)
from statecore.core._limits import MAX_ID_LENGTH, MAX_MESSAGE_BYTES, MAX_STATE_BYTES
from statecore.core._model_windows import context_budget
from statecore.core._models import Message, SessionRef
from statecore.core._tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, TokenCounter
from statecore.llm import OfflineModel
from statecore.store import open_store
from statecore.store._inputs import encode_state
from statecore.temporal._devserver import DevServer
from tests.catalog.turn_api_workflow import CatalogAgent
from tests.temporal.conftest import Env, temporal_cli

pytestmark = pytest.mark.temporal

#: "At once": a wedged workflow task is retried after about 10 s; a healthy turn takes well
#: under a second on the offline model.
AT_ONCE = 8


async def _event_count(env: Env, workflow_id: str) -> int:
    handle = env.client.get_workflow_handle(workflow_id)
    return len((await handle.fetch_history()).events)


@pytest.mark.parametrize("turn_id", ["t" * (MAX_ID_LENGTH + 1), "turn:1"])
async def test_a_bad_turn_id_is_refused_before_acceptance(
    env: Env, dev_server: DevServer, turn_id: str
) -> None:
    sessions = env.sessions
    await sessions.send(env.agent, "ids", "hello", turn_id="first")
    workflow_id = sessions.workflow_id(env.agent, "ids")
    before = await _event_count(env, workflow_id)

    with pytest.raises(InvalidIdentifierError):
        await sessions.send(env.agent, "ids", "hi", turn_id=turn_id)

    # The operator's way: the real temporal CLI with a raw JSON input.
    done = await asyncio.to_thread(
        subprocess.run,
        [
            *temporal_cli(dev_server),
            "workflow",
            "update",
            "execute",
            "--workflow-id",
            workflow_id,
            "--name",
            "send_message",
            "--input",
            f'{{"turn_id": "{turn_id}", "content": "hi"}}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "InvalidIdentifier" in done.stdout + done.stderr
    # A validator's refusal writes nothing to history.
    assert await _event_count(env, workflow_id) == before

    async with asyncio.timeout(AT_ONCE):
        result = await sessions.send(env.agent, "ids", "still here", turn_id="second")
    assert result.turn == 2


# --- the payload limit (client side) ----------------------------------------------------------


async def test_a_request_over_the_payload_limit_is_refused_before_sending(env: Env) -> None:
    small = env.new_client(payload_limit_bytes=64 * 1024)
    await small.send(env.agent, "payload", "hello", turn_id="first")
    workflow_id = small.workflow_id(env.agent, "payload")
    before = await _event_count(env, workflow_id)

    with pytest.raises(PayloadTooLargeError) as refused:
        await small.send(env.agent, "payload", "x" * 100_000, turn_id="big")
    assert refused.value.code == "PayloadTooLarge"
    assert "65536" in refused.value.message
    assert "KV or scoped state" in refused.value.message
    with pytest.raises(PayloadTooLargeError):
        await small.check_payloads("add_hint", {"text": "h" * 70_000})
    assert await _event_count(env, workflow_id) == before

    async with asyncio.timeout(AT_ONCE):
        result = await small.send(env.agent, "payload", "still here", turn_id="second")
    assert result.turn == 2


async def test_a_message_over_temporals_limit_gets_a_typed_refusal(env: Env) -> None:
    with pytest.raises(ContentTooLargeError) as refused:
        await env.sessions.send(env.agent, "huge", "x" * (5 * 1024 * 1024 // 2), turn_id="t")
    assert refused.value.code in ("ContentTooLarge", "PayloadTooLarge")
    async with asyncio.timeout(AT_ONCE):
        result = await env.sessions.send(env.agent, "huge", "small", turn_id="t2")
    assert result.turn == 1


async def test_concurrent_near_limit_turns_are_typed_and_the_session_keeps_going(
    env: Env,
) -> None:
    await env.sessions.send(env.agent, "near", "hello", turn_id="first")
    content = "y" * (MAX_MESSAGE_BYTES - 1024)
    outcomes = await asyncio.gather(
        *(env.sessions.send(env.agent, "near", content, turn_id=f"n{i}") for i in range(6)),
        return_exceptions=True,
    )
    for outcome in outcomes:
        # Each either answered or was refused with a code, never gRPC text.
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, StatecoreError), repr(outcome)
            assert type(outcome) is not StatecoreError, repr(outcome)
    async with asyncio.timeout(AT_ONCE * 2):
        result = await env.sessions.send(env.agent, "near", "after", turn_id="after")
    assert not result.duplicate


async def test_a_raw_update_over_temporals_limit_leaves_the_session_answering(
    env: Env, dev_server: DevServer, tmp_path: Path
) -> None:
    await env.sessions.send(env.agent, "raw", "hello", turn_id="first")
    workflow_id = env.sessions.workflow_id(env.agent, "raw")
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"turn_id": "big", "content": "z" * (5 * 1024 * 1024 // 2)}))
    done = await asyncio.to_thread(
        subprocess.run,
        [
            *temporal_cli(dev_server),
            "workflow",
            "update",
            "execute",
            "--workflow-id",
            workflow_id,
            "--name",
            "send_message",
            "--input-file",
            str(big),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    # Temporal admits an update up to gRPC's 4 MiB, and the worker then cannot even send the
    # validator's rejection (it echoes the request): the workflow task fails until Temporal
    # drops the update. The client rides that out instead of failing, with a typed error
    # only if it lasts longer than its retry_for.
    async with asyncio.timeout(120):
        result = await env.sessions.send(env.agent, "raw", "after", turn_id="after")
    assert result.turn == 2


async def test_a_raw_update_over_temporals_limit_never_ends_a_starting_session(env: Env) -> None:
    # Sent with the session's start, the update reaches the worker in the run's first workflow
    # task, an ordinary one (not one the server may drop). The worker's own payload check
    # must stay on: it fails that task, which Temporal retries without the update. With
    # Worker(disable_payload_error_limit=True) the refusal, which repeats the 2.5 MiB
    # request, reaches the server, and the server terminates the workflow for it.
    workflow_id = env.sessions.workflow_id(env.agent, "raw-start")
    start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        WORKFLOW_TYPE,
        env.sessions.session_input(env.agent, "raw-start"),
        id=workflow_id,
        task_queue=env.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    request = {"turn_id": "big", "content": "z" * (5 * 1024 * 1024 // 2)}
    big = RawValue(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(request).encode()))
    with pytest.raises((RPCError, WorkflowUpdateFailedError)):
        async with asyncio.timeout(120):
            await env.client.execute_update_with_start_workflow(
                "send_message", big, start_workflow_operation=start
            )
    run_id = (await env.client.get_workflow_handle(workflow_id).describe()).run_id
    async with asyncio.timeout(120):
        result = await env.sessions.send(env.agent, "raw-start", "after", turn_id="after")
    assert result.turn == 1
    description = await env.client.get_workflow_handle(workflow_id).describe()
    assert description.status == WorkflowExecutionStatus.RUNNING
    assert description.run_id == run_id


# --- every value the store accepts, a turn can read back --------------------------------------


async def test_a_turn_reads_back_the_largest_state_the_store_accepts(
    env_factory: Any, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'readback.db'}"
    # 16 MiB is read back as a claim: the worker stores large payloads by reference
    # (without that, tests/temporal/test_large_values.py shows the typed refusal).
    async with env_factory(
        url, extra_workflows=[CatalogAgent], blob_threshold_bytes=256 * 1024
    ) as env:
        ref = SessionRef(agent_id=env.agent, session_id="big-state")
        handle = await env.client.start_workflow(
            "CatalogAgent", ref, id=f"readback:{env.agent}", task_queue=env.task_queue
        )
        assert await handle.execute_update("turn", {"turn_id": "t1"}, result_type=int) == 1
        overhead = len(encode_state({"text": "", "turns": 0}).encode())
        at_limit = {"text": "x" * (MAX_STATE_BYTES - overhead), "turns": 0}
        assert len(encode_state(at_limit).encode()) == MAX_STATE_BYTES
        store = await open_store(url)
        try:
            # One byte over is refused by the store: nothing a turn could not read is stored.
            with pytest.raises(StateTooLargeError):
                async with store.transaction() as tx:
                    await tx.state.create(
                        ref.namespace, ref.session_id, ref.agent_id, {**at_limit, "turns": 10}
                    )
            async with store.transaction() as tx:
                await tx.state.create(ref.namespace, ref.session_id, ref.agent_id, at_limit)
        finally:
            await store.close()
        # The turn reads the whole document (turn.state.get) and writes a small one.
        async with asyncio.timeout(AT_ONCE * 2):
            turn = await handle.execute_update(
                "turn", {"turn_id": "t2", "notes_size": 3}, result_type=int
            )
        assert turn == 2


# --- the context budget -----------------------------------------------------------------------


def _words(tokens_about: int) -> str:
    # " wordNNN" is about two tokens in cl100k_base.
    return " ".join(f"word{i}" for i in range(tokens_about // 2))


async def test_a_long_prompt_works_out_of_the_box(env: Env) -> None:
    # Over the old fixed default of 4,096 tokens; the offline model's window is 128,000.
    result = await env.sessions.send(env.agent, "long", _words(12_000), turn_id="long")
    assert result.turn == 1
    assert result.context_tokens > 4096


async def test_a_message_that_can_never_fit_is_refused_before_sending(env: Env) -> None:
    await env.sessions.send(env.agent, "budget", "hello", turn_id="first")
    workflow_id = env.sessions.workflow_id(env.agent, "budget")
    before = await _event_count(env, workflow_id)

    with pytest.raises(ContextBudgetError) as refused:
        await env.sessions.send(
            env.agent,
            "budget",
            _words(3000),
            turn_id="big",
            profile={"max_tokens": 1000, "summarization_threshold": 800},
        )
    assert "budget is 1000" in refused.value.message
    # Told the model's window, the client refuses by it when the profile names no budget.
    small_window = env.new_client(context_window=2000)
    with pytest.raises(ContextBudgetError) as by_window:
        await small_window.send(env.agent, "budget", _words(3000), turn_id="big")
    assert "budget is 1500" in by_window.value.message
    assert await _event_count(env, workflow_id) == before

    async with asyncio.timeout(AT_ONCE):
        result = await env.sessions.send(env.agent, "budget", "still here", turn_id="second")
    assert result.turn == 2


#: The offline model's budget for a profile without max_tokens: 128,000 less 4,096.
OFFLINE_BUDGET = context_budget(None, OfflineModel.context_window)


def _exactly(tokens: int) -> str:
    """Content whose message, primed, needs ``tokens`` tokens: "é" is one token of two bytes
    in cl100k_base, so its byte length is over the budget and the validator counts it."""
    content = "é" * (tokens - REPLY_PRIMING - MESSAGE_OVERHEAD)
    assert TokenCounter().count_messages([Message(role="user", content=content)]) == tokens
    return content


async def _raw_send(env: Env, workflow_id: str, turn_id: str, content: str) -> Any:
    """A turn sent with the bare Temporal client: no statecore check before sending."""
    handle = env.client.get_workflow_handle(workflow_id)
    return await handle.execute_update(
        "send_message", {"turn_id": turn_id, "content": content}, result_type=TurnResult
    )


def _refusal(err: WorkflowUpdateFailedError) -> ApplicationError:
    assert isinstance(err.cause, ApplicationError), repr(err.cause)
    return err.cause


async def test_a_raw_update_that_can_never_fit_is_refused_before_acceptance(env: Env) -> None:
    # The session's open reports the worker's budget: no profile, no client setting.
    await env.sessions.send(env.agent, "raw-budget", "hello", turn_id="first")
    workflow_id = env.sessions.workflow_id(env.agent, "raw-budget")
    before = await _event_count(env, workflow_id)

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await _raw_send(env, workflow_id, "big", _exactly(OFFLINE_BUDGET + 1))
    cause = _refusal(refused.value)
    assert cause.type == "ContextBudgetExceeded"
    assert f"the session's context budget is {OFFLINE_BUDGET}" in cause.message
    assert await _event_count(env, workflow_id) == before  # never accepted

    async with asyncio.timeout(AT_ONCE):
        result = await env.sessions.send(env.agent, "raw-budget", "still here", turn_id="second")
    assert result.turn == 2
    # A message that just fits is accepted and answered.
    fits = await _raw_send(env, workflow_id, "fits", _exactly(OFFLINE_BUDGET))
    assert fits.turn == 3
    assert fits.context_tokens == OFFLINE_BUDGET


async def test_the_profiles_budget_refuses_a_raw_update_from_the_first_turn(env: Env) -> None:
    profile = {"max_tokens": 1000, "summarization_threshold": 800}
    await env.sessions.send(env.agent, "raw-profile", "hello", turn_id="first", profile=profile)
    workflow_id = env.sessions.workflow_id(env.agent, "raw-profile")
    before = await _event_count(env, workflow_id)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await _raw_send(env, workflow_id, "big", _words(3000))
    assert _refusal(refused.value).type == "ContextBudgetExceeded"
    assert "the session's context budget is 1000" in _refusal(refused.value).message
    assert await _event_count(env, workflow_id) == before


async def test_the_learned_budget_crosses_continue_as_new(env: Env) -> None:
    await env.sessions.send(env.agent, "raw-runs", "hello", turn_id="first", max_turns_per_run=1)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while (report := await env.sessions.describe(env.agent, "raw-runs")).checkpoint.runs < 2:
        assert loop.time() < deadline, "the session did not continue as new after its turn"
        await asyncio.sleep(0.1)
    # The new run opened nothing: its budget came with the checkpoint.
    assert report.checkpoint.budget is not None
    assert report.checkpoint.budget.max_tokens == OFFLINE_BUDGET
    workflow_id = env.sessions.workflow_id(env.agent, "raw-runs")
    before = await _event_count(env, workflow_id)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await _raw_send(env, workflow_id, "big", _exactly(OFFLINE_BUDGET + 1))
    assert _refusal(refused.value).type == "ContextBudgetExceeded"
    assert await _event_count(env, workflow_id) == before
    async with asyncio.timeout(AT_ONCE):
        result = await env.sessions.send(env.agent, "raw-runs", "next", turn_id="second")
    assert result.turn == 2


async def test_many_large_messages_in_one_task_never_stall_the_session(env: Env) -> None:
    # 511 KiB of spaces is few tokens but among the slowest texts to count; eight sent at
    # once reach the validator in one workflow task, which the SDK fails if it does not
    # yield within 2 s. The validator counts a bounded amount per task and admits the rest
    # (each fits its budget here), so every turn is answered.
    await env.sessions.send(env.agent, "raw-many", "hello", turn_id="first")
    workflow_id = env.sessions.workflow_id(env.agent, "raw-many")
    content = " " * (511 * 1024) + "x"
    async with asyncio.timeout(180):
        outcomes = await asyncio.gather(
            *(_raw_send(env, workflow_id, f"many{i}", content) for i in range(8)),
            return_exceptions=True,
        )
    assert all(isinstance(outcome, TurnResult) for outcome in outcomes), outcomes
    async with asyncio.timeout(AT_ONCE):
        result = await env.sessions.send(env.agent, "raw-many", "after", turn_id="after")
    assert result.turn == 10
