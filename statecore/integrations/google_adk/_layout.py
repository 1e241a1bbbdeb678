"""Where an ADK session lives in statecore's store.

ADK names a session by (app name, user id, session id) and keeps state in three scopes. In a
store opened for namespace ``ns``:

* the session is the statecore session ``SessionRef(namespace=ns, agent_id=<app name>,
  session_id=<user id>@<session id>)``, or ``session_id=<session id>`` for the user
  ``DEFAULT_USER_ID`` (so a statecore session ``chat-1`` of the agent ``support`` is ADK's
  session ``chat-1`` of the user ``user`` in the app ``support``, and ``alice@chat-1`` is
  Alice's); an ADK session id therefore contains no ``@``. Its events are the messages of
  that session's log (``statecore.integrations.google_adk._events``);
* its header (owning user, session-scope state, create and update times) is the session's
  scoped-state document, (``ns``, task ``<session id>``, agent ``<app name>``); the document's
  version is the revision a session object carries, which is what refuses a stale writer;
* ``app:`` state is the namespace-wide KV entry ``adk.app`` / ``<app name>``;
* ``user:`` state is the namespace-wide KV entry ``adk.user`` / ``<app name>:<user id>``;
* ``temp:`` state is never stored.

Deleting the statecore session (``delete_session``, a reset of all its stores) removes its
events and header together; app and user state are shared and stay.
"""

from __future__ import annotations

from typing import Any

from google.adk.sessions import Session
from google.adk.sessions.state import State
from pydantic import JsonValue

from statecore.core._errors import InvalidIdentifierError, InvalidInputError
from statecore.core._identifiers import validate_key
from statecore.core._models import KVScope, ScopedState, SessionRef, StatecoreModel
from statecore.store import StoreTransaction

APP_BUCKET = "adk.app"
USER_BUCKET = "adk.user"
#: The ADK user of a statecore session whose id names none.
DEFAULT_USER_ID = "user"
#: Marks a scoped-state document as an ADK session header.
HEADER_MARK = "adk_session"


class SessionHeader(StatecoreModel):
    """The stored header of an ADK session (its scoped-state document)."""

    adk_session: int = 1
    user_id: str
    state: dict[str, JsonValue]
    create_time: float
    update_time: float
    #: The id of the newest event, for session objects that carry no revision.
    last_event_id: str | None = None


def session_ref(namespace: str, app_name: str, user_id: str, session_id: str) -> SessionRef:
    """The statecore session of an ADK session (identifiers checked, never rewritten)."""
    if not isinstance(user_id, str) or not isinstance(session_id, str):
        raise InvalidInputError("user_id and session_id must be strings")
    if "@" in session_id:
        raise InvalidIdentifierError(
            f"ADK session id {session_id!r} contains '@', which separates the user from the "
            "session in statecore's session id; choose an id without it"
        )
    if user_id == DEFAULT_USER_ID:
        return SessionRef(namespace=namespace, agent_id=app_name, session_id=session_id)
    return SessionRef(namespace=namespace, agent_id=app_name, session_id=f"{user_id}@{session_id}")


def adk_ids(ref: SessionRef) -> tuple[str, str, str]:
    """(app name, user id, session id) of a statecore session: the inverse of session_ref."""
    user_id, at, session_id = ref.session_id.rpartition("@")
    return ref.agent_id, (user_id if at else DEFAULT_USER_ID), session_id


def user_key(app_name: str, user_id: str) -> str:
    if not isinstance(user_id, str):
        raise InvalidInputError(f"user_id must be a string, not {type(user_id).__name__}")
    return validate_key(f"{app_name}:{user_id}")


def shared(namespace: str) -> KVScope:
    return KVScope(namespace=namespace, owner="")


async def read_header(tx: StoreTransaction, ref: SessionRef) -> tuple[SessionHeader, int] | None:
    """The header and its version, or None when the session is not an ADK session."""
    doc: ScopedState | None = await tx.state.get(ref.namespace, ref.session_id, ref.agent_id)
    if doc is None or doc.state.get(HEADER_MARK) != 1:
        return None
    return SessionHeader.model_validate(doc.state), doc.version


def header_of(doc: ScopedState) -> SessionHeader | None:
    return SessionHeader.model_validate(doc.state) if doc.state.get(HEADER_MARK) == 1 else None


async def write_header(
    tx: StoreTransaction, ref: SessionRef, header: SessionHeader, expected_version: int | None
) -> int:
    """Create the header (``expected_version`` None) or replace the version the caller read;
    a concurrent writer makes the store raise VersionConflictError. Returns the new version."""
    data: dict[str, Any] = header.model_dump(mode="json")
    if expected_version is None:
        created = await tx.state.create(ref.namespace, ref.session_id, ref.agent_id, data)
        return created.version
    updated = await tx.state.update(
        ref.namespace, ref.session_id, ref.agent_id, data, expected_version=expected_version
    )
    return updated.version


async def read_shared(
    tx: StoreTransaction, namespace: str, bucket: str, key: str
) -> tuple[dict[str, Any], int]:
    """A shared state dict and its KV revision (0: none stored)."""
    entry = await tx.kv.get(shared(namespace), bucket, key)
    if entry is None:
        return {}, 0
    value = entry.value if isinstance(entry.value, dict) else {}
    return dict(value), entry.revision


async def merge_shared(
    tx: StoreTransaction, namespace: str, bucket: str, key: str, delta: dict[str, Any]
) -> None:
    """Apply ``delta`` to a shared state dict. The write is conditional on the revision just
    read, so two sessions updating one user's state never lose a write: the loser's whole
    transaction raises RevisionConflictError and runs again."""
    if not delta:
        return
    current, revision = await read_shared(tx, namespace, bucket, key)
    current.update(delta)
    await tx.kv.put(shared(namespace), bucket, key, current, expected_revision=revision)


def merged_state(
    session_state: dict[str, Any], app_state: dict[str, Any], user_state: dict[str, Any]
) -> dict[str, Any]:
    """The state a session object shows: its own, then ``app:`` and ``user:`` keys."""
    merged = dict(session_state)
    merged.update({State.APP_PREFIX + k: v for k, v in app_state.items()})
    merged.update({State.USER_PREFIX + k: v for k, v in user_state.items()})
    return merged


def check_state_keys(state: dict[str, Any], what: str) -> None:
    """Refuse keys ADK's scopes cannot hold: a key that is not a string, is empty, or is a
    bare scope prefix (``app:``, ``user:``, ``temp:``) naming no key."""
    if not isinstance(state, dict):
        raise InvalidInputError(f"{what} must be a dict, not {type(state).__name__}")
    for key in state:
        if not isinstance(key, str) or not key.strip():
            raise InvalidInputError(f"{what} has the key {key!r}; state keys are non-empty text")
        if key in (State.APP_PREFIX, State.USER_PREFIX, State.TEMP_PREFIX):
            raise InvalidInputError(
                f"{what} has the key {key!r}, a scope prefix with no name after it; "
                f"write e.g. {key}counter"
            )


def set_revision(session: Session, version: int) -> None:
    """Record on the session object the header version it reflects."""
    session._storage_update_marker = f"statecore:{version}"


def revision_of(session: Session) -> int | None:
    marker = session._storage_update_marker
    if marker is None or not marker.startswith("statecore:"):
        return None
    return int(marker.removeprefix("statecore:"))
