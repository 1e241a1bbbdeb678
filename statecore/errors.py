"""statecore's errors, and the way back from a Temporal failure to its statecore class.

Every class of the error tree (``statecore.core._errors``) is importable from here and from
``statecore`` itself. Across a Temporal boundary an error travels as an ``ApplicationError``
whose ``type`` is the class's ``code``: workflow code sees it as the cause of an
``ActivityError`` (or raised by a turn), a client as the cause of a
``WorkflowUpdateFailedError`` or ``WorkflowFailureError``. ``from_failure`` turns any of
these back into the statecore error, so both sides catch classes, not strings::

    from statecore.errors import VersionConflictError, from_failure

    try:
        await handle.execute_update(Writer.add_step, ask)
    except Exception as exc:
        error = from_failure(exc)
        if isinstance(error, VersionConflictError):
            ...  # read again, redo the step
        elif error is not None:
            raise error from exc
        else:
            raise

It imports nothing of Temporal (it reads the failure's attributes), so workflow code may
import it inside the sandbox, and store-only programs pay nothing for it.
"""

from __future__ import annotations

from typing import Any

from statecore.core._errors import (
    ERRORS_BY_CODE,
    AgentRunError,
    AlreadyExistsError,
    BlobCorruptError,
    BlobError,
    BlobMissingError,
    BlobStoreUnavailableError,
    BlobTooLargeError,
    BundleError,
    CheckpointTooLargeError,
    ConflictError,
    ContentTooLargeError,
    ContextBudgetError,
    CorruptCheckpointError,
    DatabaseUnavailableError,
    DriverMissingError,
    EmptyContentError,
    InvalidIdentifierError,
    InvalidInputError,
    InvalidLimitError,
    MigrationError,
    ModelError,
    ModelUnavailableError,
    NotFoundError,
    PayloadDecryptionError,
    PayloadTooLargeError,
    ResetRefusedError,
    RevisionConflictError,
    SessionClosedError,
    SessionDrainingError,
    SessionIdentityError,
    SessionNotFoundError,
    SessionPausedError,
    SessionStateError,
    ShareAccessError,
    ShareError,
    ShareExpiredError,
    ShareInvalidatedError,
    ShareRevokedError,
    ShareTokenUnknownError,
    StatecoreError,
    StateTooLargeError,
    TemporalRequestError,
    TurnNotFoundError,
    UnknownAgentError,
    UnknownEncodingError,
    UnknownEncryptionKeyError,
    UnknownOperationError,
    UnknownStoreError,
    UnknownStrategyError,
    VersionConflictError,
)

#: How deep ``from_failure`` follows causes (an update's failure, its activity's, ...).
_MAX_CAUSES = 16


def from_failure(failure: BaseException) -> StatecoreError | None:
    """The statecore error that ``failure`` carries, or None when it carries none.

    ``failure`` may be a statecore error (returned as it is), a Temporal
    ``ApplicationError`` whose ``type`` is a statecore code, or any exception whose causes
    lead to one: ``ActivityError``, ``WorkflowUpdateFailedError``, ``WorkflowFailureError``,
    ``ChildWorkflowError`` or an exception raised ``from`` one of them. A failed query,
    whose message starts with the code (``"SessionPaused: ..."``), is read as well. The
    result is a new instance of the matching class with the failure's message, and its
    details when the failure carries them (an activity's refusal does)."""
    seen = 0
    current: BaseException | None = failure
    while current is not None and seen < _MAX_CAUSES:
        seen += 1
        if isinstance(current, StatecoreError):
            return current
        found = _from_application_error(current) or _from_query_failure(current)
        if found is not None:
            return found
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__
    return None


def _from_application_error(err: BaseException) -> StatecoreError | None:
    code = getattr(err, "type", None)
    if type(err).__name__ != "ApplicationError" or not isinstance(code, str):
        return None
    cls = ERRORS_BY_CODE.get(code)
    if cls is None:
        return None
    message = getattr(err, "message", None)
    return cls(message if isinstance(message, str) else str(err), **_details(err))


def _from_query_failure(err: BaseException) -> StatecoreError | None:
    if type(err).__name__ != "WorkflowQueryFailedError":
        return None
    code, _, message = str(getattr(err, "message", "") or err).partition(": ")
    cls = ERRORS_BY_CODE.get(code)
    return cls(message) if cls is not None else None


def _details(err: BaseException) -> dict[str, Any]:
    try:
        details = getattr(err, "details", ())
    except Exception:  # a codec that cannot decode them: the class and message still hold
        return {}
    if details and isinstance(details[0], dict) and all(isinstance(k, str) for k in details[0]):
        return dict(details[0])
    return {}


__all__ = [
    "ERRORS_BY_CODE",
    "AgentRunError",
    "AlreadyExistsError",
    "BlobCorruptError",
    "BlobError",
    "BlobMissingError",
    "BlobStoreUnavailableError",
    "BlobTooLargeError",
    "BundleError",
    "CheckpointTooLargeError",
    "ConflictError",
    "ContentTooLargeError",
    "ContextBudgetError",
    "CorruptCheckpointError",
    "DatabaseUnavailableError",
    "DriverMissingError",
    "EmptyContentError",
    "InvalidIdentifierError",
    "InvalidInputError",
    "InvalidLimitError",
    "MigrationError",
    "ModelError",
    "ModelUnavailableError",
    "NotFoundError",
    "PayloadDecryptionError",
    "PayloadTooLargeError",
    "ResetRefusedError",
    "RevisionConflictError",
    "SessionClosedError",
    "SessionDrainingError",
    "SessionIdentityError",
    "SessionNotFoundError",
    "SessionPausedError",
    "SessionStateError",
    "ShareAccessError",
    "ShareError",
    "ShareExpiredError",
    "ShareInvalidatedError",
    "ShareRevokedError",
    "ShareTokenUnknownError",
    "StateTooLargeError",
    "StatecoreError",
    "TemporalRequestError",
    "TurnNotFoundError",
    "UnknownAgentError",
    "UnknownEncodingError",
    "UnknownEncryptionKeyError",
    "UnknownOperationError",
    "UnknownStoreError",
    "UnknownStrategyError",
    "VersionConflictError",
    "from_failure",
]
