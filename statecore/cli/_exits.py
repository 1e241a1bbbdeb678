"""Exit codes of the ``statecore`` command and the one place errors are mapped to them.

Scripts branch on these numbers, so they are part of the command's contract.
"""

from __future__ import annotations

import socket

from pydantic import ValidationError

from statecore.core._errors import (
    ConflictError,
    DatabaseUnavailableError,
    InvalidInputError,
    NotFoundError,
    ResetRefusedError,
    SessionStateError,
    ShareTokenUnknownError,
    StatecoreError,
    first_problem,
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4
EXIT_UNREACHABLE = 5
EXIT_INTERRUPTED = 130

#: The payload encoding of statecore's encryption codec (statecore.temporal._encryption.ENCODING).
ENCRYPTED_ENCODING = "binary/encrypted"

EXIT_CODES_HELP = """\
exit codes:
  0  ok
  1  any other error
  2  bad arguments (unknown option, malformed id, unknown store, unreadable bundle file)
  3  not found (no such session workflow, no state stored for the session)
  4  refused by the session (paused, closed, draining, conflict, import over a live session)
  5  cannot reach Temporal or the database (or no worker answered in time)
"""


class UsageError(StatecoreError):
    """The command line asks for something that cannot be done as written."""

    code = "Usage"


class UnreachableError(StatecoreError):
    """Temporal, the database or the session's worker did not answer."""

    code = "Unreachable"


def _rpc_unreachable(exc: BaseException | None) -> bool:
    from temporalio.service import RPCError, RPCStatusCode

    return isinstance(exc, RPCError) and exc.status in (
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
    )


def _temporal_unreachable(exc: BaseException) -> bool:
    from statecore.temporal._connection import TemporalUnreachableError

    return isinstance(exc, TemporalUnreachableError)


def _database_unreachable(exc: BaseException) -> bool:
    from sqlalchemy.exc import DBAPIError

    # A refused or unresolvable connection, or the driver reporting one (wrong database
    # name, bad credentials, a SQLite path that cannot be opened).
    return isinstance(exc, ConnectionError | socket.gaierror | DBAPIError)


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code for an error that ended a command."""
    if isinstance(exc, UsageError | ValidationError | InvalidInputError):
        return EXIT_USAGE
    if isinstance(exc, UnreachableError | DatabaseUnavailableError | TimeoutError):
        return EXIT_UNREACHABLE
    if _rpc_unreachable(exc):
        return EXIT_UNREACHABLE
    if _temporal_unreachable(exc):
        return EXIT_UNREACHABLE
    if isinstance(exc, StatecoreError) and _rpc_unreachable(exc.__cause__):
        return EXIT_UNREACHABLE
    if isinstance(exc, NotFoundError | ShareTokenUnknownError):
        return EXIT_NOT_FOUND
    if isinstance(exc, SessionStateError | ConflictError | ResetRefusedError):
        return EXIT_REFUSED
    if _database_unreachable(exc):
        return EXIT_UNREACHABLE
    return EXIT_ERROR


def error_code_for(exc: BaseException) -> str:
    """A stable name for the error in ``--json`` output."""
    if isinstance(exc, StatecoreError):
        return exc.code
    if isinstance(exc, ValidationError):
        return "InvalidInput"
    if _database_unreachable(exc) or _rpc_unreachable(exc):
        return UnreachableError.code
    return type(exc).__name__


def error_message(exc: BaseException) -> str:
    """One line that says what went wrong (never a traceback)."""
    if isinstance(exc, ValidationError):
        # Field names as the command's flags spell them.
        where, problem = first_problem(exc)
        text = f"{where.replace('_', '-')}: {problem}" if where else problem
    elif isinstance(exc, StatecoreError):
        text = exc.message
    elif _database_unreachable(exc):
        text = f"cannot reach the database: {_first_line(str(exc))}"
    else:
        text = str(exc).strip("'\"") or type(exc).__name__
    if ENCRYPTED_ENCODING in str(text):
        # The converter only says it met an unknown encoding; say what to do about it.
        text = (
            "the session's payloads are encrypted and this command has no keyring: set "
            "STATECORE_ENCRYPTION_KEYS (or --encryption-keys) to the workers' keys"
        )
    return " ".join(str(text).split())


def _first_line(text: str) -> str:
    # SQLAlchemy appends the statement and a documentation link on later lines.
    return text.strip().splitlines()[0] if text.strip() else text
