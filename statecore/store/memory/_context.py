"""What the module objects of one memory transaction share: its workspace, clock and counter.

Kept apart from ``store.py`` so the module classes (conversation, kv, ...) and the store that
builds them import it without importing each other.
"""

from __future__ import annotations

from datetime import datetime

from statecore.core._errors import SessionNotFoundError, StatecoreError
from statecore.core._models import SessionRef
from statecore.core._tokens import TokenCounter
from statecore.store.memory._schema import SessionKey, SessionPartition, Workspace


class TxContext:
    """What the module objects of one transaction share."""

    def __init__(
        self, workspace: Workspace, now: datetime, counter: TokenCounter, default_ttl: int
    ) -> None:
        self._workspace = workspace
        self.now = now
        self.counter = counter
        self.default_ttl = default_ttl
        self.open = True

    @property
    def ws(self) -> Workspace:
        if not self.open:
            raise StatecoreError(
                "this transaction has ended; its module objects are valid only inside their "
                "'async with store.transaction()' block. Open a new transaction"
            )
        return self._workspace

    def session(self, ref: SessionRef) -> SessionPartition:
        """The session's rows for reading; SessionNotFoundError if it does not exist."""
        part = self.ws.sessions.get(session_key(ref))
        if part is None:
            raise _missing(ref)
        return part

    def session_for_write(self, ref: SessionRef) -> SessionPartition:
        part = self.ws.sessions.writable(session_key(ref))
        if part is None:
            raise _missing(ref)
        return part


def session_key(ref: SessionRef) -> SessionKey:
    return (ref.namespace, ref.agent_id, ref.session_id)


def _missing(ref: SessionRef) -> SessionNotFoundError:
    return SessionNotFoundError(
        f"session {ref} does not exist; call sessions.ensure(ref) first", session=str(ref)
    )


