"""A session workflow's identity: its input is a session's, and its id is the one that input
makes.

The workflow id is ``workflow_id_for(agent_id, session_id, namespace)``; identifiers never
contain ``:`` (``validate_identifier``), so the id names exactly one session. A start by hand
(``temporal workflow start``) can still give any id and any input. The SDK decodes a
workflow's input before any workflow code runs and fails the workflow task, again on every
retry, when it cannot: the id would stay taken by a run that never makes progress. So the
workflow takes its input raw and checks it here, and a start that is not a valid session
ends at once with a non-retryable ``SessionIdentity`` failure.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from statecore.agent_session._handler_payloads import decode_payload
from statecore.contract._session import SessionInput, workflow_id_for
from statecore.core._errors import SessionIdentityError, StatecoreError, validation_message

#: Changes the workflow made after histories existed (see workflow.patched).
PATCH_CHECK_WORKFLOW_ID = "statecore-check-workflow-id"

#: Stands in for the input of a start that was refused, so handlers that run in the same
#: first task (update-with-start) find an object; they refuse, and the run fails at once.
_REFUSED_START = SessionInput.model_construct(agent_id="refused-start", session_id="refused-start")


def session_input(payload: Any) -> tuple[SessionInput, ApplicationError | None]:
    """The workflow's input, and the failure to end the run with when it is not a session's
    input or the workflow id is not the one it makes (None when all is well)."""
    try:
        value = decode_payload("AgentSession input", payload)
        if isinstance(value, SessionInput):
            inp = value
        else:
            inp = SessionInput.model_validate(value if value is not None else {})
    except ValidationError as err:
        return _REFUSED_START, _refused(
            f"the workflow input is not a session's: {validation_message(err)}. Start a "
            'session with {"agent_id": str, "session_id": str}'
        )
    except StatecoreError as err:
        return _REFUSED_START, _refused(f"the workflow input is not a session's: {err.message}")
    expected = workflow_id_for(inp.agent_id, inp.session_id, inp.namespace)
    actual = workflow.info().workflow_id
    # Only a mismatch asks for the patch marker, so a well-formed start costs no event.
    if actual != expected and workflow.patched(PATCH_CHECK_WORKFLOW_ID):
        return inp, _refused(
            f"workflow id {actual!r} is not the id of the session in its input "
            f"(agent {inp.agent_id!r}, session {inp.session_id!r}, namespace "
            f"{inp.namespace!r}), which is {expected!r}; start the session with that id, "
            "or let AgentSessionClient start it"
        )
    return inp, None


def _refused(message: str) -> ApplicationError:
    err = SessionIdentityError(message)
    return ApplicationError(err.message, type=err.code, non_retryable=True)
