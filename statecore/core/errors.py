"""One error tree for everything statecore raises.

Every error is a ``StatecoreError``. Each carries a stable ``code`` (used as the Temporal
``ApplicationError.type`` when it crosses an activity or update boundary) and a message that
says what happened and what to do instead. ``retryable`` tells the Temporal layer whether a
retry can succeed: bad input never can, a draining session or a busy database can.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ValidationError


class StatecoreError(Exception):
    """Root of every error statecore raises on purpose."""

    code: ClassVar[str] = "StatecoreError"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


# --- bad input: the caller must change the request -------------------------------------------


class InvalidInputError(StatecoreError):
    """The request is malformed; fix the input and send it again."""

    code = "InvalidInput"


class EmptyContentError(InvalidInputError):
    code = "EmptyContent"


class ContentTooLargeError(InvalidInputError):
    code = "ContentTooLarge"


class InvalidIdentifierError(InvalidInputError):
    """An id, bucket or key contains characters that are not allowed (path or SQL metacharacters,
    whitespace, NUL) or is empty or too long."""

    code = "InvalidIdentifier"


class InvalidLimitError(InvalidInputError):
    code = "InvalidLimit"


class UnknownStoreError(InvalidInputError):
    code = "UnknownStore"


class UnknownStrategyError(InvalidInputError):
    code = "UnknownStrategy"


class UnknownAgentError(InvalidInputError):
    """A turn names a model or framework agent this worker does not have; register it with
    the plugin (``models=`` or ``agents=``) or start the session with a name it has."""

    code = "UnknownAgent"


class ContextBudgetError(InvalidInputError):
    """The parts of a context that cannot be dropped (system prompt, summary, hints, new
    messages) alone exceed the token budget: raise the budget, shorten the new messages or
    compact the summary and hints."""

    code = "ContextBudgetExceeded"


class StateTooLargeError(InvalidInputError):
    """A scoped-state document is over the 16 MB limit; store large data elsewhere by reference."""

    code = "StateTooLarge"


class BundleError(InvalidInputError):
    """An export bundle is corrupted, truncated, of another schema version or inconsistent."""

    code = "InvalidBundle"


class UnknownEncodingError(InvalidInputError):
    """The tokenizer encoding is not available offline."""

    code = "UnknownEncoding"


# --- conflicts: re-read and decide ------------------------------------------------------------


class ConflictError(StatecoreError):
    code = "Conflict"


class RevisionConflictError(ConflictError):
    """A KV write named an ``expected_revision`` that is no longer current."""

    code = "RevisionConflict"


class VersionConflictError(ConflictError):
    """A scoped-state update named an ``expected_version`` that is no longer current."""

    code = "VersionConflict"


class AlreadyExistsError(ConflictError):
    code = "AlreadyExists"


class NotFoundError(StatecoreError):
    code = "NotFound"


class SessionNotFoundError(NotFoundError):
    code = "SessionNotFound"


class ResetRefusedError(StatecoreError):
    """A reset could not be honoured exactly as asked; nothing was cleared rather than more."""

    code = "ResetRefused"


class MigrationError(StatecoreError):
    """The database schema is not at the version this code needs; run ``statecore db upgrade``."""

    code = "SchemaOutOfDate"


# --- session lifecycle: the Temporal layer -----------------------------------------------------


class SessionStateError(StatecoreError):
    """The session cannot take this request in its current status."""

    code = "SessionState"


class SessionPausedError(SessionStateError):
    """The session is paused by an operator; send ``resume`` first."""

    code = "SessionPaused"


class SessionClosedError(SessionStateError):
    """The session is closed; a new message to it opens it again from SQL."""

    code = "SessionClosed"


class SessionDrainingError(SessionStateError):
    """The session is moving to a new run; retry shortly (the client does this by itself)."""

    code = "SessionDraining"
    retryable = True


class ModelError(StatecoreError):
    """The model call failed in a way a retry will not fix (bad request, auth)."""

    code = "ModelError"


class AgentRunError(StatecoreError):
    """A framework agent's run raised (in a tool, a guardrail, a handoff or the framework
    itself). Nothing of the turn was stored and the session is unchanged; fix the cause and
    send the turn again."""

    code = "AgentRunFailed"


class ModelUnavailableError(ModelError):
    """The model endpoint is overloaded or down; retried with backoff."""

    code = "ModelUnavailable"
    retryable = True


# --- payload encryption (statecore.encryption.codec) -------------------------------------


class PayloadDecryptionError(StatecoreError):
    """An encrypted payload could not be decrypted: it was altered, truncated or is not
    statecore's format. Never passed on as ciphertext; find out who wrote it."""

    code = "PayloadDecryptionFailed"


class UnknownEncryptionKeyError(PayloadDecryptionError):
    """A payload names an encryption key id the keyring does not hold; add that key (older
    keys stay in the keyring after a rotation until no history needs them)."""

    code = "UnknownEncryptionKey"


ERRORS_BY_CODE: dict[str, type[StatecoreError]] = {}


def _index(cls: type[StatecoreError]) -> None:
    ERRORS_BY_CODE[cls.code] = cls
    for sub in cls.__subclasses__():
        _index(sub)


_index(StatecoreError)


def error_from_code(code: str | None, message: str) -> StatecoreError:
    """Rebuild a typed error from a Temporal ``ApplicationError.type`` (client side)."""
    cls = ERRORS_BY_CODE.get(code or "", StatecoreError)
    return cls(message)


# --- pydantic's refusals, in statecore's words -------------------------------------------------


def first_problem(err: ValidationError) -> tuple[str, str]:
    """The first problem pydantic found: its field path (``"profile.max_tokens"``, or ``""``
    for the input as a whole) and its message."""
    first = err.errors()[0]
    return ".".join(str(part) for part in first.get("loc", ())), str(first.get("msg"))


def validation_message(err: ValidationError, *, what: str = "", limit: int | None = 1) -> str:
    """``"field.path: message"`` for the first ``limit`` problems (all if None), joined by
    ``"; "``. A problem with no field path is named ``what`` (or shown bare)."""
    problems = err.errors() if limit is None else err.errors()[:limit]
    parts = []
    for problem in problems:
        where = ".".join(str(part) for part in problem.get("loc", ())) or what
        parts.append(f"{where}: {problem.get('msg')}" if where else str(problem.get("msg")))
    hidden = err.error_count() - len(problems)
    return "; ".join(parts) + (f" (and {hidden} more)" if hidden > 0 else "")
