"""Handler input taken raw and decoded here, so no payload can fail a workflow task.

The SDK decodes a handler's arguments before it calls the handler. A payload it cannot
decode (JSON nested deeper than the parser allows, a ``\\ud800`` escape, an unknown
encoding) then never reaches the handler: a signal is dropped with a log line only and an
update is rejected as an untyped ``RuntimeError``. A handler whose argument is annotated as
exactly ``RawValue`` receives the payload undecoded; ``parse_request`` turns it into the
request model or an InvalidInputError, which the handler records (signals) or returns
(updates, queries) like any other rejection.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue

from statecore.contract._session import TooManyInputs
from statecore.core._errors import InvalidInputError, first_problem, validation_message

M = TypeVar("M", bound=BaseModel)

#: The default of a raw handler argument: the request came without input. Typed Any so a
#: handler can annotate its argument as exactly ``RawValue``, the annotation the SDK needs
#: to hand the payload over undecoded.
NO_INPUT: Any = None


def decode_payload(operation: str, payload: RawValue | TooManyInputs | Any) -> Any:
    """The JSON value a raw handler argument carries (None when nothing was sent)."""
    if payload is None:
        return None
    if isinstance(payload, TooManyInputs):
        raise InvalidInputError(
            f"{operation} takes one JSON object; {payload.count} inputs were sent"
        )
    if not isinstance(payload, RawValue):
        return payload  # already a value (a handler called from workflow code)
    try:
        return workflow.payload_converter().from_payload(payload.payload)
    # The converter raises ValueError for bad JSON (pydantic), RuntimeError for an unknown
    # encoding and RecursionError for nesting; each is the sender's mistake, reported as such.
    except (ValueError, TypeError, RuntimeError, RecursionError) as err:
        raise InvalidInputError(
            f"{operation}: the input is not JSON this workflow can read ({_reason(err)}); send"
            " one JSON object without lone surrogate escapes or extreme nesting"
        ) from err


def received_size(payload: RawValue | Any) -> int:
    """Bytes of a raw handler argument's JSON as it arrived (any codec already undone), so
    a size limit is checked without encoding the request again; a value handed over by
    workflow code is measured as it would be sent."""
    if payload is None or isinstance(payload, TooManyInputs):
        return 0
    if isinstance(payload, RawValue):
        return len(payload.payload.data)
    return len(workflow.payload_converter().to_payloads([payload])[0].data)


def parse_request(operation: str, model: type[M], payload: Any) -> M:
    """Decode and validate a handler's input. No input means ``{}`` (every field of every
    request model is optional or required by the model itself)."""
    value = decode_payload(operation, payload)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise InvalidInputError(
            f"{operation} takes a JSON object, not {_json_kind(value)}", value=repr(value)[:80]
        )
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise InvalidInputError(f"{operation}: {validation_message(err)}") from err


def _reason(err: Exception) -> str:
    if isinstance(err, ValidationError):
        return first_problem(err)[1][:200]
    return (str(err).splitlines() or [type(err).__name__])[0][:200]


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
