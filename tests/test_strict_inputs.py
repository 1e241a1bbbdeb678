"""Every input an operator or a program sends is read strictly: no string, float or number
taken for a boolean or an integer, and no NaN or infinity anywhere (the store refuses them)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from statecore.contract._activities import KVOp
from statecore.contract._session import (
    CloseInput,
    CompactInput,
    DescribeInput,
    OperatorInput,
    SendMessageInput,
    SessionInput,
)

IDS = {"agent_id": "a", "session_id": "s"}


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (CloseInput, {"delete_state": "yes"}),
        (CloseInput, {"delete_state": "true"}),
        (CloseInput, {"delete_state": 1}),
        (DescribeInput, {"include_data": "1"}),
        (CompactInput, {"max_tokens": "100"}),
        (CompactInput, {"max_messages": 2.0}),
        (CompactInput, {"max_tokens": True}),
        (SessionInput, {**IDS, "ttl_seconds": "3600"}),
        (SessionInput, {**IDS, "delete_on_close": "false"}),
        (SessionInput, {**IDS, "auto_summarize": 0}),
        (SessionInput, {**IDS, "max_turns_per_run": 10.0}),
        (SessionInput, {**IDS, "model_timeout_seconds": math.inf}),
        (SendMessageInput, {"turn_id": "t", "content": "x", "metadata": {"a": math.nan}}),
        (SendMessageInput, {"turn_id": "t", "content": "x", "metadata": {"a": [{"b": -math.inf}]}}),
        (SendMessageInput, {"turn_id": 7, "content": "x"}),
    ],
)
def test_loose_values_are_refused(model: type[OperatorInput], fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(fields)


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (CloseInput, {"delete_state": True}),
        (CompactInput, {"strategy": "recent", "max_messages": 2}),
        (SessionInput, {**IDS, "model_timeout_seconds": 60}),  # an integer is a number
        (SendMessageInput, {"turn_id": "t", "content": "x", "metadata": {"a": 1.5}}),
    ],
)
def test_exact_values_are_accepted(model: type[OperatorInput], fields: dict[str, Any]) -> None:
    model.model_validate(fields)


def test_every_operator_input_is_strict() -> None:
    # A new input model must inherit the rule, not restate it.
    inputs = OperatorInput.__subclasses__()
    assert {m.__name__ for m in inputs} >= {
        "SessionInput",
        "SendMessageInput",
        "PauseInput",
        "ResumeInput",
        "ResetInput",
        "CompactInput",
        "AddHintInput",
        "MigrateInput",
        "CloseInput",
        "DescribeInput",
    }
    for model in inputs:
        assert model.model_config.get("strict") is True
        assert model.model_config.get("allow_inf_nan") is False


@pytest.mark.parametrize("value", [math.nan, math.inf, {"nested": [-math.inf]}])
def test_a_turn_cannot_buffer_a_kv_value_the_store_would_refuse(value: Any) -> None:
    with pytest.raises(ValidationError, match="finite"):
        KVOp(op="put", bucket="notes", key="k", value=value)
