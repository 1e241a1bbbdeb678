"""Generated JSON thrown at every signal, update and query input of AgentSession.

Each input is decoded the way the workflow decodes it (``parse_request``, the one path from a
raw payload to a request model). The property: a typed refusal (a statecore error whose code
is in the error tree, so the handler records or returns it) or a request model that keeps
every promise the session relies on, and nothing else: no other exception (that would fail
the workflow task), no coercion (a destructive flag only on the exact JSON ``true``), and
nothing accepted that the store would refuse. tests/temporal/test_input_properties_live.py
sends a few of these to a real session.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from statecore.agent_session._handler_payloads import parse_request
from statecore.contract._session import (
    AddHintInput,
    CloseInput,
    CompactInput,
    DescribeInput,
    MigrateInput,
    PauseInput,
    ResetInput,
    ResumeInput,
    SendMessageInput,
    SessionInput,
)
from statecore.core._errors import ERRORS_BY_CODE, StatecoreError
from statecore.core._identifiers import check_identifier
from statecore.core._models import Message, SessionRef
from statecore.store._inputs import checked_append, encode_json

#: Every input of AgentSession: (operation, request model). Updates reset_state and
#: compact_state take the signals' models; describe_state and the query take DescribeInput.
INPUTS: list[tuple[str, type[BaseModel]]] = [
    ("send_message", SendMessageInput),
    ("pause", PauseInput),
    ("resume", ResumeInput),
    ("reset", ResetInput),
    ("reset_state", ResetInput),
    ("compact", CompactInput),
    ("compact_state", CompactInput),
    ("add_hint", AddHintInput),
    ("migrate", MigrateInput),
    ("close", CloseInput),
    ("describe", DescribeInput),
    ("describe_state", DescribeInput),
    ("workflow input", SessionInput),
]

#: Values careless clients send: loose types, limits' edges, separators, non-finite numbers.
TRICKY = st.sampled_from(
    [
        "yes",
        "true",
        "1",
        "",
        " ",
        "100",
        1,
        0,
        1.0,
        2.5,
        -1,
        2**63,
        math.nan,
        math.inf,
        "t" * 128,
        "t" * 129,
        "turn:1",
        "a/b",
        "a..b",
        "a\x00b",
        "\ud800",
        [],
        {},
        ["conversation"],
        ["nope"],
        "summarize",
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | TRICKY
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def requests_for(model: type[BaseModel]) -> st.SearchStrategy[Any]:
    """Objects with the model's own field names (often right, often wrong), or any JSON."""
    fields = {name: JSON for name in model.model_fields}
    shaped = st.fixed_dictionaries({}, optional=fields)
    return shaped | JSON


def as_sent(value: Any) -> Any:
    """The value as it arrives after JSON (NaN and Infinity survive, as Python's json writes
    them and Temporal's converter reads them); None if it cannot be written as JSON at all."""
    try:
        return json.loads(json.dumps(value))
    except (ValueError, TypeError):
        return None


def check_accepted(operation: str, raw: dict[str, Any], request: BaseModel) -> None:
    """The promises an accepted request keeps."""
    # No coercion: every field set from the input holds exactly the JSON value's type.
    for name, sent in raw.items():
        held = getattr(request, name)
        if isinstance(sent, bool) or isinstance(held, bool):
            assert sent is held or isinstance(held, BaseModel), (operation, name, sent, held)
        if isinstance(held, int) and not isinstance(held, bool):
            assert isinstance(sent, int) and not isinstance(sent, bool), (name, sent)
        if isinstance(held, str):
            assert sent == held, (name, sent, held)
    if isinstance(request, CloseInput):
        assert request.delete_state is (raw.get("delete_state") is True)
    if isinstance(request, SendMessageInput):
        # What the validator admits, the store writes.
        ref = SessionRef(agent_id="a", session_id="s")
        checked_append(ref, request.turn_id, [request.to_message()], 0)
        # to_message trusts the checked fields: Message's own rules admit what it builds.
        message = request.to_message()
        assert Message.model_validate(message.model_dump()) == message
        encode_json(request.metadata, "metadata", 10**9)
    if isinstance(request, SessionInput):
        for kind in ("agent_id", "session_id", "namespace"):
            check_identifier(kind, getattr(request, kind))
    if isinstance(request, MigrateInput) and request.task_queue:
        check_identifier("task_queue", request.task_queue)
    # An accepted request survives its own round trip (the continue-as-new input does this).
    assert type(request).model_validate_json(request.model_dump_json()) == request


def refusal_or_promise(operation: str, model: type[BaseModel], value: Any) -> str | None:
    """None for an accepted request (its promises checked), else the refusal's code."""
    try:
        request = parse_request(operation, model, value)
    except StatecoreError as err:
        assert err.code in ERRORS_BY_CODE, err
        return err.code
    check_accepted(operation, value if isinstance(value, dict) else {}, request)
    return None


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.data())
def test_every_input_is_refused_with_a_code_or_keeps_its_promises(data: st.DataObject) -> None:
    operation, model = data.draw(st.sampled_from(INPUTS))
    value = as_sent(data.draw(requests_for(model)))
    refusal_or_promise(operation, model, value)
