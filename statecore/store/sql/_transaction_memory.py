"""What one SQL transaction has learnt, so that it asks the database each thing once.

A turn asks for its session's header row from every module it touches (log, summary,
hints, window, orchestration), learns from its first read whether the session has hints
and whether the turn has messages yet, and learns from its append where the context
window's tokens start. ``TransactionMemory`` keeps those answers for the transaction's
lifetime and nothing else: no statement is sent from here. ``SqlContext`` (``_context``),
which sends them, decides when an answer may be kept and when it must be forgotten.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statecore.core._models import SessionRef
from statecore.store.sql._session_header import SESSION_COLUMNS, SessionRow
from statecore.store.sql._window_cache import SessionKey


class TransactionMemory:
    """The answers one transaction has had from the database, by session."""

    def __init__(self) -> None:
        # Sessions whose header row this transaction has locked (locks last until commit)
        # or found absent: either way there is nothing more to ask the database.
        self._sessions_locked: set[SessionKey] = set()
        # Header rows read in this transaction, kept current by update_session. A turn asks
        # for its session's row from every module it touches (log, summary, hints, window,
        # orchestration); one read serves them all.
        self._session_rows: dict[SessionKey, SessionRow] = {}
        # Header values written by touch_session and not yet sent, by header primary key.
        self._touches: dict[int, dict[str, Any]] = {}
        # Sessions this transaction found without hints (read_for_turn).
        self._hintless: set[int] = set()
        # Turns (header primary key, turn id) this transaction found without messages while
        # holding the write lock (read_for_turn on SQLite). See ``turn_has_no_messages``.
        self._turns_without_messages: set[tuple[int, str]] = set()
        # What ``append_to_log`` learnt of a session's window, by header primary key: the
        # window start it asked about and the log's running token total before the first
        # message there (None: no such message). See ``window_base``.
        self._window_bases: dict[int, tuple[int, int | None]] = {}
        # The message rows read_for_turn brought along, by header primary key: the cached
        # window's anchor seq they start at, and the rows (see ``prefetched_window``).
        self._prefetched: dict[int, tuple[int, list[dict[str, Any]]]] = {}

    def prefetched_window(self, session_pk: int, first_seq: int) -> list[dict[str, Any]] | None:
        """The session's non-retracted message rows from seq ``first_seq`` on, ascending, as
        ``read_for_turn`` read them beside the header (one snapshot with it), or None when
        it read none from there. Taken once: a second read asks SQL again."""
        found = self._prefetched.pop(session_pk, None)
        if found is None or found[0] != first_seq:
            return None
        return found[1]

    def turn_has_no_messages(self, session_pk: int, turn_id: str) -> bool:
        """Whether this transaction saw, holding the session's lock (SQLite's write lock, or
        the header's row lock: ``find_session_for_turn``), that the turn has no messages,
        and has written none of its messages since (``messages_written``)."""
        return (session_pk, turn_id) in self._turns_without_messages

    def messages_written(self, session_pk: int, turn_id: str) -> None:
        """Note that messages of the turn were written in this transaction."""
        self._turns_without_messages.discard((session_pk, turn_id))

    def has_no_hints(self, session_pk: int) -> bool:
        """Whether this transaction saw that the session has no hints and added none since.

        Like the header row it comes with, this is the transaction's view as of that read:
        a hint another transaction commits later shows from the session's next transaction
        on (a hint was never ordered against a turn: adding one takes no lock)."""
        return session_pk in self._hintless

    def hints_added(self, session_pk: int) -> None:
        """Note that hints were written for the session in this transaction."""
        self._hintless.discard(session_pk)

    def cached_session_row(self, ref: SessionRef) -> SessionRow | None:
        """The header row an unlocked read would be answered with, without asking SQL."""
        return self._session_rows.get((ref.namespace, ref.agent_id, ref.session_id))

    def keep_session_row(self, key: SessionKey, columns: Mapping[str, Any]) -> SessionRow:
        """Keep a header row read without its lock (by ``select_session(False)`` or a
        statement that reads the same columns beside others), so later unlocked reads in
        this transaction are answered from it."""
        row = SessionRow(**{name: columns[name] for name in SESSION_COLUMNS})
        for name, value in self._touches.get(row.id, {}).items():
            setattr(row, name, value)  # not sent yet: SQL still holds the older values
        self._session_rows[key] = row
        return row

    def _header_values(self, row: SessionRow, values: dict[str, Any]) -> dict[str, Any]:
        """What a header write sends: ``values`` with the idle clock ``touch_session`` held
        back. Any header change may move the window or follow a rewrite of the log (clear,
        restore, compaction), so what ``append_to_log`` learnt of the window is forgotten."""
        self._window_bases.pop(row.id, None)
        return {**self._touches.pop(row.id, {}), **values}

    def window_base(self, session_pk: int, start: int) -> tuple[bool, int | None]:
        """``(True, base)`` when this transaction's last append to the session learnt the
        log's running token total before its first non-retracted message at or after
        ``start`` (``base`` None: there is none), and nothing since can have changed it;
        ``(False, None)`` otherwise.

        Appends after the first message of the window leave it in place; everything else
        that could move it (a header change: clear, restore, a new window start; a
        retraction; deleting sessions) forgets it (``forget_window``)."""
        known = self._window_bases.get(session_pk)
        if known is None or known[0] != start:
            return False, None
        return True, known[1]

    def forget_window(self, session_pk: int) -> None:
        """Forget what ``append_to_log`` learnt of the session's window (a retraction)."""
        self._window_bases.pop(session_pk, None)

    def touch_session(self, row: SessionRow, **values: Any) -> None:
        """``update_session`` for the session's idle clock (last access, TTL, expiry), sent
        with the transaction's next header update or at its end, whichever comes first.

        A turn's commit touches the session and then advances its log counters: one UPDATE
        instead of two. Only ``expired`` reads these columns back from SQL, and it sends what
        is pending first (``send_touches``)."""
        self._touches.setdefault(row.id, {}).update(values)
        for name, value in values.items():
            setattr(row, name, value)

    def forget_sessions(self) -> None:
        """Drop the copies of header rows (after deleting sessions)."""
        self._session_rows.clear()
        self._window_bases.clear()
        self._turns_without_messages.clear()

    def note_session_locked(self, namespace: str, agent_id: str, session_id: str) -> None:
        """Record that this transaction holds the session header's row lock."""
        self._sessions_locked.add((namespace, agent_id, session_id))
