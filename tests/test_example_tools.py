"""The example calculator tool: arithmetic only, parsed with ast, never eval."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.tools import MAX_EXPRESSION_LENGTH, ExampleTools, evaluate
from statecore.activities._resources import WorkerResources
from statecore.contract._activities import ToolCallInput
from statecore.core._errors import InvalidInputError
from statecore.core._models import SessionRef, ToolCall


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("6*7", 42),
        ("2**10", 1024),
        ("(1 + 2) * 3 / 4", 2.25),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("+1.5e3", 1500.0),
        ("2 ** -1", 0.5),
    ],
)
def test_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('true')", "only numbers"),
        ("open('/etc/passwd')", "only numbers"),
        ("x + 1", "only numbers"),
        ("[1, 2]", "only numbers"),
        ("True + 1", "only numbers"),
        ("'a' * 3", "only numbers"),
        ("1 if 1 else 2", "only numbers"),
        ("(1).__class__", "only numbers"),
        ("1 +", "not an arithmetic expression"),
        ("1 / 0", "division by zero"),
        ("9 ** 9 ** 9", "too large"),
        ("((2 ** 64) ** 64) ** 64", "too large"),
        ("10.0 ** 400", "too large"),
        ("(-8) ** 0.5", "not a real number"),
        ("1+" * MAX_EXPRESSION_LENGTH + "1", "longer than"),
    ],
)
def test_anything_else_is_refused(expression: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        evaluate(expression)


def call(arguments: str) -> ToolCallInput:
    return ToolCallInput(
        ref=SessionRef(agent_id="a", session_id="s"),
        turn_id="t",
        call=ToolCall(id="call_1", name="calculator", arguments=arguments),
    )


async def test_the_activity_answers_and_refuses_bad_arguments_without_retry() -> None:
    tools = ExampleTools(WorkerResources(models={}))
    env = ActivityEnvironment()
    out = await env.run(tools.calculator, call('{"expression": "6*7"}'))
    assert out.content == "6*7 = 42"
    for arguments in ("not json", "[1]", "{}", '{"expression": 7}', '{"expression": "1/0"}'):
        with pytest.raises(ApplicationError) as err:
            await env.run(tools.calculator, call(arguments))
        assert err.value.type == "InvalidInput" and err.value.non_retryable, arguments
