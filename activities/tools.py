"""Two example tools for the ToolAgent workflow: a safe calculator and a KV lookup.

A tool is an ordinary activity that takes ``ToolCallInput`` and returns ``ToolCallResult``;
a ``ToolBinding`` offers it to the model under a short name. Arguments arrive as the JSON text
the model wrote. Bad arguments are the model's mistake, not an outage: they raise a
non-retryable typed error, which the agent hands back to the model as the tool's result.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from typing import Any

from temporalio import activity

from statecore.activities._failures import typed_errors
from statecore.activities._resources import WorkerResources
from statecore.contract._activities import ToolBinding, ToolCallInput, ToolCallResult
from statecore.core._errors import InvalidInputError
from statecore.store._retry import run_transaction
from statecore.store._tool_and_task_buckets import validate_user_bucket

TOOL_CALCULATOR = "statecore.example.calculator"
TOOL_LOOKUP = "statecore.example.lookup"

CALCULATOR = ToolBinding(
    name="calculator",
    activity=TOOL_CALCULATOR,
    description="Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
    timeout_seconds=10,
)
LOOKUP = ToolBinding(
    name="lookup",
    activity=TOOL_LOOKUP,
    description="Read a value this session stored in its key-value store.",
    parameters={
        "type": "object",
        "properties": {"key": {"type": "string"}, "bucket": {"type": "string"}},
        "required": ["key"],
    },
    timeout_seconds=30,
)

MAX_EXPRESSION_LENGTH = 200
#: Integers past this size are refused before they are computed (``9**9**9`` would hang).
MAX_RESULT_BITS = 4096
DEFAULT_LOOKUP_BUCKET = "facts"

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression, parsed with ``ast`` (never ``eval``): only
    numbers, the operators above and parentheses; anything else is an InvalidInputError."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise InvalidInputError(f"expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as err:
        raise InvalidInputError(f"not an arithmetic expression: {expression!r}") from err
    try:
        return _value(tree.body)
    except ZeroDivisionError as err:
        raise InvalidInputError("division by zero") from err
    except OverflowError as err:
        raise InvalidInputError("the result is too large") from err


def _value(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        huge_power = (
            isinstance(node.op, ast.Pow)
            and isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and max(left.bit_length(), 1) * right > MAX_RESULT_BITS
        )
        if huge_power:
            raise OverflowError
        result = _BINARY[type(node.op)](left, right)
        if isinstance(result, int) and result.bit_length() > MAX_RESULT_BITS:
            raise OverflowError
        if isinstance(result, complex):  # (-8) ** 0.5
            raise InvalidInputError("the result is not a real number")
        return result
    found = ast.unparse(node)[:40]
    raise InvalidInputError(
        f"only numbers, + - * / // % ** and parentheses are allowed; found {found!r}"
    )


def _arguments(input: ToolCallInput) -> dict[str, Any]:
    try:
        args = json.loads(input.call.arguments or "{}")
    except json.JSONDecodeError as err:
        raise InvalidInputError(f"{input.call.name} arguments are not JSON") from err
    if not isinstance(args, dict):
        raise InvalidInputError(f"{input.call.name} takes a JSON object of arguments")
    return args


def _text_argument(args: dict[str, Any], name: str, default: str | None = None) -> str:
    value = args.get(name, default)
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"argument {name!r} must be a non-empty string")
    return value


class ExampleTools:
    """The example tools' activities; ``lookup`` reads the worker's statecore store."""

    def __init__(self, resources: WorkerResources) -> None:
        self._r = resources

    @activity.defn(name=TOOL_CALCULATOR)
    @typed_errors
    async def calculator(self, input: ToolCallInput) -> ToolCallResult:
        expression = _text_argument(_arguments(input), "expression")
        return ToolCallResult(content=f"{expression} = {evaluate(expression)}")

    @activity.defn(name=TOOL_LOOKUP)
    @typed_errors
    async def lookup(self, input: ToolCallInput) -> ToolCallResult:
        args = _arguments(input)
        key = _text_argument(args, "key")
        # Only user buckets: the tools and task slots are not the model's to read.
        bucket = validate_user_bucket(_text_argument(args, "bucket", DEFAULT_LOOKUP_BUCKET))
        entry = await run_transaction(
            self._r.store, lambda tx: tx.kv.get(input.ref.kv_scope, bucket, key), read_only=True
        )
        if entry is None:
            return ToolCallResult(content=f"{bucket}/{key} is not set")
        if isinstance(entry.value, bytes):
            return ToolCallResult(content=f"{bucket}/{key} holds {len(entry.value)} bytes")
        return ToolCallResult(content=json.dumps(entry.value, ensure_ascii=False))


def example_tools(resources: WorkerResources) -> list[Callable[..., Any]]:
    """The example tools' activities, for ``StatecorePlugin(activity_factories=[...])``."""
    tools = ExampleTools(resources)
    return [tools.calculator, tools.lookup]
