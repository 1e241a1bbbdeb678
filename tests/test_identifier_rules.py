"""One rule per kind of identifier: the update validator, the client, the turn API and the
store accept exactly the same ids, so nothing the validator admits into history is refused by
the store afterwards (a 129-character or ``turn:1`` turn id used to be)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from statecore.contract._session import MigrateInput, SendMessageInput, SessionInput
from statecore.core._errors import InvalidIdentifierError
from statecore.core._identifiers import IDENTIFIER_KINDS, check_identifier
from statecore.core._limits import MAX_ID_LENGTH
from statecore.core._models import Message, SessionRef
from statecore.store._inputs import checked_append

SAMPLES = [
    "t" * MAX_ID_LENGTH,
    "t" * (MAX_ID_LENGTH + 1),
    "turn:1",
    "turn-1",
    "a..b",
    "a/b",
    "-leading",
    "t@x.y_z",
    "turn 1",
    "",
]


def _accepted(call: Any) -> bool:
    try:
        call()
    except (InvalidIdentifierError, ValidationError):
        return False
    return True


@pytest.mark.parametrize("turn_id", SAMPLES)
def test_validator_and_store_agree_on_turn_ids(turn_id: str) -> None:
    rule = _accepted(lambda: check_identifier("turn_id", turn_id))
    validator = _accepted(lambda: SendMessageInput(turn_id=turn_id, content="hi"))
    ref = SessionRef(agent_id="a", session_id="s")
    message = Message(role="user", content="hi")
    store = _accepted(lambda: checked_append(ref, turn_id, [message], 0))
    assert rule == validator == store


@pytest.mark.parametrize("value", SAMPLES)
def test_session_ids_and_task_queues_follow_their_kinds(value: str) -> None:
    for field in ("agent_id", "session_id", "namespace"):
        ids = {"agent_id": "a", "session_id": "s", field: value}
        expected = _accepted(lambda f=field: check_identifier(f, value))
        assert _accepted(lambda ids=ids: SessionInput(**ids)) == expected
        assert _accepted(lambda ids=ids: SessionRef(**ids)) == expected
    expected = _accepted(lambda: check_identifier("task_queue", value))
    assert _accepted(lambda: MigrateInput(task_queue=value)) == (expected or value == "")


def test_plain_identifiers_never_hold_the_workflow_id_separator() -> None:
    for kind, rule in IDENTIFIER_KINDS.items():
        if kind != "key":
            assert not _accepted(lambda r=rule, k=kind: r.check("a:b", k))
