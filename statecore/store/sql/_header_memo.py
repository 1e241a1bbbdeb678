"""PostgreSQL: each session's header as this process's last turn commit left it.

A chat turn's commit on PostgreSQL normally opens a transaction, reads the session's header
under its row lock and then writes: five round trips (BEGIN, the locked read, the append,
the turn's last writes, COMMIT). When this process committed the session's previous turn
itself, it already knows what that read would return, unless someone else changed the
header since. A memo keeps what the commit left: the header row's values, the row version's
``xmin`` (the transaction that wrote it, which every UPDATE of the row changes) and the
log's running token total before the window's first message. The next commit of the
session sends everything in one statement that checks the version first
(``_turn_commit``); when the row moved on, that statement writes nothing and the
commit runs the usual way.

A memo is taken out when a commit uses it and put back only by a commit that succeeded, so
one that failed, for whatever reason, leaves none behind. Bounded: the sessions whose turns
this process committed least recently go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import CTE

from statecore.store.sql._window_cache import SessionKey

#: Sessions remembered by default: a worker's sessions rarely exceed it, and a session that
#: falls out costs its next commit the usual five round trips, nothing else.
DEFAULT_HEADER_MEMOS = 1000


@dataclass(frozen=True)
class HeaderMemo:
    """A session's header row after a committed turn, and what else that commit learnt."""

    #: The header's columns, as the committed row holds them.
    columns: Mapping[str, Any]
    #: The row version's ``xmin``, as text.
    xmin: str
    #: The window's first seq when the commit ended, and the log's running token total
    #: before its first non-retracted message from there (None: there was none).
    window_start: int
    window_base: int | None


class HeaderMemos:
    """The memos of the sessions whose turns this process committed lately."""

    def __init__(self, capacity: int = DEFAULT_HEADER_MEMOS) -> None:
        self._capacity = capacity
        self._memos: OrderedDict[SessionKey, HeaderMemo] = OrderedDict()

    def take(self, key: SessionKey) -> HeaderMemo | None:
        """The session's memo, removed: a commit that uses it puts a new one back."""
        return self._memos.pop(key, None)

    def put(self, key: SessionKey, memo: HeaderMemo) -> None:
        self._memos[key] = memo
        self._memos.move_to_end(key)
        while len(self._memos) > self._capacity:
            self._memos.popitem(last=False)

    def drop(self, key: SessionKey) -> None:
        self._memos.pop(key, None)

    def __len__(self) -> int:
        return len(self._memos)


#: A data-modifying CTE sent with a header UPDATE: its prebuilt builder, its bind parameters.
Along = tuple[Callable[[], CTE], dict[str, Any]]


@dataclass
class DeferredTurn:
    """A turn commit whose writes are held back to be sent in one statement
    (``SqlContext.defer_turn``): the memo it started from and, once the append has run,
    the header's new values and the appended messages' bind parameters."""

    key: SessionKey
    pk: int
    memo: HeaderMemo
    header: dict[str, Any] | None = None
    along: Along | None = None
