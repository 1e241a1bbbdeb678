"""The session ids ``StatecoreSession`` takes, and what it says about the others.

The SDK's sessions take any string as a session id; statecore's identifiers are letters,
digits and ``_ . - @``, starting with a letter or digit, at most 128 characters. An id outside
that rule is refused, never rewritten: the id in the database, in ``describe`` and in the CLI
is the one the application used, and one id can never name two logs. The error says what to
pass instead (the SDK's examples write ``SQLiteSession(":memory:")`` meaning an in-memory
database; to the SDK that is the session id ``":memory:"``).
"""

from __future__ import annotations

from typing import Any

from statecore.core._errors import InvalidIdentifierError
from statecore.core._models import validate_identifier


def check_session_id(session_id: Any) -> None:
    """Refuse an id statecore cannot store as written, saying what to pass instead."""
    try:
        validate_identifier(session_id, "session_id")
    except InvalidIdentifierError as exc:
        hint = (
            " (SQLiteSession(':memory:') names the session ':memory:' and keeps it in memory; "
            "for that, choose an id and pass database_url='memory://')"
            if isinstance(session_id, str) and session_id.strip().lower() == ":memory:"
            else ""
        )
        raise InvalidIdentifierError(
            f"{exc.message}; StatecoreSession stores the session id as written, so pass an id "
            f"statecore can store, e.g. 'conversation-1'{hint}",
            **exc.details,
        ) from exc
