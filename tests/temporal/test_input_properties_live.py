"""A few generated bad inputs (tests/test_input_properties.py's strategies) sent as raw JSON
payloads to every signal, update and query of a live session: each gets the typed refusal
the contract models predict, no stored row changes, and the next turn is answered at once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from tests.sql_rows import all_rows
from tests.temporal.conftest import Env
from tests.test_input_properties import INPUTS, as_sent, refusal_or_promise, requests_for

pytestmark = pytest.mark.temporal

UPDATES = {"send_message", "reset_state", "compact_state", "describe_state"}
PER_INPUT = 2


def refused_examples() -> list[tuple[str, Any, str]]:
    """(operation, JSON value, expected code): PER_INPUT refused values per input."""
    found: list[tuple[str, Any, str]] = []

    @settings(
        max_examples=400,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def collect(data: st.DataObject) -> None:
        # Draw the same way every time (Hypothesis replays draws); skip only afterwards.
        operation, model = data.draw(st.sampled_from(INPUTS))
        value = as_sent(data.draw(requests_for(model)))
        if operation == "workflow input":
            return
        if sum(1 for op, _, _ in found if op == operation) >= PER_INPUT:
            return
        code = refusal_or_promise(operation, model, value)
        if code is not None:
            found.append((operation, value, code))

    collect()
    return found


def _raw(value: Any) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode()))


async def _rejected_signal(env: Env, count: int) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while len((report := await env.sessions.describe(env.agent, "props")).rejections) < count:
        assert loop.time() < deadline, "a refused signal left no rejection in describe"
        await asyncio.sleep(0.05)
    return report.rejections[-1].code


async def test_generated_bad_inputs_get_typed_refusals_and_change_nothing(env: Env) -> None:
    examples = refused_examples()
    assert {op for op, _, _ in examples} >= UPDATES | {"pause", "add_hint", "close", "describe"}
    await env.sessions.send(env.agent, "props", "hello", turn_id="first")
    handle = env.sessions.handle(env.agent, "props")
    before = await all_rows(env.database_url)
    signals = 0
    for operation, value, expected in examples:
        if operation in UPDATES:
            with pytest.raises(WorkflowUpdateFailedError) as failed:
                await handle.execute_update(operation, args=[_raw(value)])
            cause = failed.value.cause
            assert isinstance(cause, ApplicationError), (operation, value, cause)
            assert cause.type == expected, (operation, value, cause.type, cause.message)
        elif operation == "describe":
            with pytest.raises(WorkflowQueryFailedError) as query_failed:
                await handle.query("describe", _raw(value))
            assert query_failed.value.message.startswith(f"{expected}: "), (value, query_failed)
        else:
            await handle.signal(operation, _raw(value))
            signals += 1
            assert await _rejected_signal(env, signals) == expected, (operation, value)
    assert await all_rows(env.database_url) == before
    async with asyncio.timeout(8):
        result = await env.sessions.send(env.agent, "props", "still here", turn_id="second")
    assert result.turn == 2
