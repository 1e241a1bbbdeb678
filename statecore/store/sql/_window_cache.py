"""The windows a store's process read lately, so the next turn reads only the rows added since.

A turn reads its session's context window on every turn: hundreds of rows, most of them read
and converted by the previous turn as well. This cache keeps, per session header row, the last
window a read-only transaction read, and the next read of that session asks SQL only for the
rows from the window's newest message on. The newest cached message (the anchor) proves the
cached rows are still the log:

- messages are immutable once written, except retraction and clearing;
- a retraction marks the newest message not yet retracted, so retracting any cached message
  would first retract the anchor (``retract_last`` is the only writer of ``retracted_at``);
- clearing deletes every row and restarts ``seq`` at 1; a new row at the anchor's place
  differs from it in its turn id, index, write time, running token total or text.

So when the row at the anchor's ``seq`` is still there, not retracted, and identical in those
fields, every cached row is as SQL holds it; otherwise the window is read whole, as without a
cache. A rolled-back write cannot leave rows here either: only read-only transactions fill it.

A turn's first read (``SqlContext.read_for_turn``) finds the header by the session's key, not
its primary key, so the cache also knows which key each window was read for (``anchor_for``):
that read then brings the rows from the anchor on in the same statement, one round trip fewer
per turn on a server database.

Bounded by the messages and the tokens held in all; the least recently used sessions go first.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statecore.core._models import StoredMessage

#: A session's key: (namespace, agent id, session id).
SessionKey = tuple[str, str, str]

#: Messages kept across all sessions by default: 50 sessions with windows of 400 messages.
DEFAULT_WINDOW_CACHE_MESSAGES = 20_000
#: Tokens of message text kept across all sessions (~16 MB of text at ~4 bytes a token), so
#: that a few sessions with long messages cannot make the cache large.
WINDOW_CACHE_TOKENS = 4_000_000


@dataclass(frozen=True)
class CachedWindow:
    """Every non-retracted message of a session from ``first_seq`` to its newest, ascending."""

    first_seq: int
    messages: tuple[StoredMessage, ...]

    @property
    def anchor(self) -> StoredMessage:
        return self.messages[-1]

    @functools.cached_property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.messages)


def same_row(cached: StoredMessage, row: Mapping[str, Any]) -> bool:
    """Whether a ``messages`` row read now is the very message ``cached`` was read from.

    The write time alone would tell on a real clock; a clock that stands still (a test's)
    makes the turn id, index, running token total and text tell it instead."""
    return (
        cached.seq == row["seq"]
        and cached.turn_id == row["turn_id"]
        and cached.index == row["idx"]
        and cached.created_at == row["created_at"]
        and cached.cumulative_tokens == row["cumulative_tokens"]
        and cached.role == row["role"]
        and cached.content == row["content"]
    )


class WindowCache:
    """Windows by session header primary key, least recently used first out."""

    def __init__(
        self,
        max_messages: int = DEFAULT_WINDOW_CACHE_MESSAGES,
        max_tokens: int = WINDOW_CACHE_TOKENS,
    ) -> None:
        self.max_messages = max_messages
        self.max_tokens = max_tokens
        self._windows: OrderedDict[int, CachedWindow] = OrderedDict()
        # The session key each window was read for, both ways (``anchor_for``).
        self._pk_by_key: dict[SessionKey, int] = {}
        self._key_by_pk: dict[int, SessionKey] = {}
        self._held = 0
        self._held_tokens = 0

    def get(self, session_pk: int) -> CachedWindow | None:
        found = self._windows.get(session_pk)
        if found is not None:
            self._windows.move_to_end(session_pk)
        return found

    def anchor_for(self, key: SessionKey) -> tuple[int, int] | None:
        """``(header primary key, the anchor's seq)`` of the window cached for the session
        ``key``, without counting as a use: the caller reads from there, then ``get``s it."""
        session_pk = self._pk_by_key.get(key)
        if session_pk is None:
            return None
        return session_pk, self._windows[session_pk].anchor.seq

    def put(self, session_pk: int, window: CachedWindow, key: SessionKey | None = None) -> None:
        """Keep ``window`` of the header row ``session_pk``; ``key``, the session's key, lets a
        read by key find it (``anchor_for``)."""
        self.discard(session_pk)
        if key is not None and key in self._pk_by_key:
            self.discard(self._pk_by_key[key])  # the session was deleted and created again
        size = len(window.messages)
        if not size or size > self.max_messages or window.tokens > self.max_tokens:
            return
        self._windows[session_pk] = window
        if key is not None:
            self._pk_by_key[key] = session_pk
            self._key_by_pk[session_pk] = key
        self._held += size
        self._held_tokens += window.tokens
        while self._held > self.max_messages or self._held_tokens > self.max_tokens:
            self.discard(next(iter(self._windows)))

    def discard(self, session_pk: int) -> None:
        gone = self._windows.pop(session_pk, None)
        key = self._key_by_pk.pop(session_pk, None)
        if key is not None:
            del self._pk_by_key[key]
        if gone is not None:
            self._held -= len(gone.messages)
            self._held_tokens -= gone.tokens

    @property
    def held_messages(self) -> int:
        return self._held
