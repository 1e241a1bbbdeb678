"""ADK's own errors, raised as statecore errors too.

A caller written against ADK catches ``google.adk.errors.StaleSessionError`` (and ADK's
``AlreadyExistsError``); a caller written against statecore catches its own tree. Each error
here is both, so neither has to know which service it talks to.
"""

from __future__ import annotations

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError as ADKAlreadyExistsError

from statecore.core._errors import AlreadyExistsError, ConflictError

#: ADK's own wording (``DatabaseSessionService``), so logs and callers read the same text.
STALE_MESSAGE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)


class StaleADKSessionError(StaleSessionError, ConflictError):
    """The session object is older than what is stored: another writer (another process, or
    another service instance) appended since it was loaded. Nothing was stored; load the
    session again (``get_session``) and append to the fresh copy."""

    code = "StaleSession"

    def __init__(self, message: str = STALE_MESSAGE) -> None:
        ConflictError.__init__(self, message)


class ADKSessionExistsError(ADKAlreadyExistsError, AlreadyExistsError):
    """``create_session`` with an id that is taken. Nothing was stored."""

    code = "AlreadyExists"

    def __init__(self, message: str) -> None:
        AlreadyExistsError.__init__(self, message)
