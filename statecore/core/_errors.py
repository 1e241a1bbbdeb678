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


class PayloadTooLargeError(ContentTooLargeError):
    """A request is over Temporal's payload limit (2 MiB by default) as the client would send
    it, codec included. Send large data by reference: write it to KV or scoped state (or any
    store, as a claim check) and send its key."""

    code = "PayloadTooLarge"


class InvalidIdentifierError(InvalidInputError):
    """An id, bucket or key contains characters that are not allowed (path or SQL metacharacters,
    whitespace, NUL) or is empty or too long."""

    code = "InvalidIdentifier"


class InvalidLimitError(InvalidInputError):
    code = "InvalidLimit"


class UnknownStoreError(InvalidInputError):
    code = "UnknownStore"


class UnknownOperationError(InvalidInputError):
    """A signal or update name the session does not handle (a typo such as ``Pause``); the
    message lists the names it does handle."""

    code = "UnknownOperation"


class SessionIdentityError(InvalidInputError):
    """A session workflow whose id is not the one its input makes, or whose input is not a
    session's: it would store turns under another session's name, so it ends at once."""

    code = "SessionIdentity"


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
    """A scoped-state or flow document is over its limit (MAX_STATE_BYTES, 16 MiB), or a turn
    reads one over MAX_INLINE_VALUE_BYTES (1 MiB) on a worker that does not store large
    payloads by reference (``StatecorePlugin(blob_threshold_bytes=...)``)."""

    code = "StateTooLarge"


class CheckpointTooLargeError(StateTooLargeError):
    """A LangGraph checkpoint, channel value or write is over the saver's size limit."""

    code = "CheckpointTooLarge"


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


class TurnNotFoundError(NotFoundError):
    """A turn asked for by id (to stream it, or to follow it again after a disconnect) is
    neither running nor committed in that session: an unknown id, or one of another session."""

    code = "TurnNotFound"


class CorruptCheckpointError(StatecoreError):
    """A stored LangGraph checkpoint, channel value or write cannot be deserialised."""

    code = "CorruptCheckpoint"


class ResetRefusedError(StatecoreError):
    """A reset could not be honoured exactly as asked, or did not name what it clears;
    nothing was cleared rather than more."""

    code = "ResetRefused"


class MigrationError(StatecoreError):
    """The database schema is not at the version this code needs; run ``statecore db upgrade``."""

    code = "SchemaOutOfDate"


# --- share tokens: a grant to another agent's state was refused ----------------------------


class ShareError(StatecoreError):
    """A share token was refused; nothing was read or written through it."""

    code = "ShareRefused"


class ShareTokenUnknownError(ShareError):
    """No grant of this namespace has this token: it was mistyped, guessed, or issued in
    another namespace. Ask the sharing agent for a new token."""

    code = "ShareTokenUnknown"


class ShareExpiredError(ShareError):
    """The grant's expiry has passed; ask the sharing agent to share again."""

    code = "ShareExpired"


class ShareRevokedError(ShareError):
    """The owner or an operator revoked the grant."""

    code = "ShareRevoked"


class ShareInvalidatedError(ShareError):
    """The shared state was reset or deleted after it was shared: the token named state that
    no longer exists. The owner must share the new state again."""

    code = "ShareInvalidated"


class ShareAccessError(ShareError):
    """The grant does not allow this: a write through a read grant, a state token used as a KV
    bucket (or the reverse), or a revoke by someone who is not the owner."""

    code = "ShareAccessDenied"


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


# --- the database cannot be used from here ----------------------------------------------------


class DatabaseUnavailableError(StatecoreError):
    """The database did not answer (refused, unresolvable, or silent past the connect
    timeout); the message names its address, never its password. Retried where a retry helps."""

    code = "DatabaseUnavailable"
    retryable = True


class DriverMissingError(StatecoreError):
    """The database URL names a driver that is not installed; the message names the extra
    to install (``pip install 'statecore[postgres]'``)."""

    code = "DriverMissing"


class TemporalRequestError(StatecoreError):
    """Temporal refused or failed a request for a reason that is not one of statecore's
    codes (the message carries Temporal's own words). Check the server and the worker logs."""

    code = "TemporalRequestFailed"


# --- payload encryption (statecore.temporal._encryption) -------------------------------------


class PayloadDecryptionError(StatecoreError):
    """An encrypted payload could not be decrypted: it was altered, truncated or is not
    statecore's format. Never passed on as ciphertext; find out who wrote it."""

    code = "PayloadDecryptionFailed"


class UnknownEncryptionKeyError(PayloadDecryptionError):
    """A payload names an encryption key id the keyring does not hold; add that key (older
    keys stay in the keyring after a rotation until no history needs them)."""

    code = "UnknownEncryptionKey"


# --- payloads stored by reference (statecore.temporal._blob_driver) --------------------------


class BlobError(StatecoreError):
    """A payload stored by reference in statecore's database could not be stored or read."""

    code = "BlobFailed"


class BlobMissingError(BlobError):
    """A claim in a workflow's history names a blob the database does not hold: it was
    deleted by hand, the worker reads another database than the one that stored it, or its
    row was lost. The message names the claim's digest and the workflow."""

    code = "BlobMissing"


class BlobCorruptError(BlobError):
    """A stored blob's bytes do not hash to the digest its claim names (altered or truncated
    in the database). Never passed on; the message names the claim and the workflow."""

    code = "BlobCorrupt"


class BlobStoreUnavailableError(BlobError):
    """The database did not answer while a blob was stored or read. Nothing was lost: a
    store is one transaction, written again by the retry; Temporal retries the workflow task
    or the activity whose payload it was."""

    code = "BlobStoreUnavailable"
    retryable = True


class BlobTooLargeError(BlobError):
    """A payload is larger than one blob may be (``MAX_BLOB_BYTES``) or than the MariaDB
    server takes in one statement (``max_allowed_packet``)."""

    code = "BlobTooLarge"


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
