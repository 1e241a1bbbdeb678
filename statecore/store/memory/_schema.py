"""The memory backend's data, and the copy-on-write view a transaction works on.

Committed data lives in plain dicts that a transaction never mutates: the first write to a
row group (one session, one KV scope, one scoped-state document) copies it into the
transaction's overlay. Commit moves the overlay into the committed dicts in one synchronous
step (no await in between), rollback drops it, so a block's writes become visible together or
not at all.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Literal, TypeVar

from statecore.core._change_events import ChangeEvent
from statecore.core._models import FlowCheckpoint, Hint, SessionInfo, StoredMessage, Summary

K = TypeVar("K")
V = TypeVar("V")


class _Deleted(enum.Enum):
    """The overlay's mark for a deleted entry (an enum member, so ``is`` narrows the type)."""

    DELETED = enum.auto()


_DELETED: Literal[_Deleted.DELETED] = _Deleted.DELETED

SessionKey = tuple[str, str, str]  # (namespace, agent_id, session_id)
ScopeKey = tuple[str, str]  # (namespace, owner)
StateKey = tuple[str, str, str]  # (namespace, task_id, agent_id)


@dataclass(frozen=True)
class KVRow:
    kind: str
    payload: bytes | str  # raw bytes, or canonical JSON text
    revision: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None

    def live(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now


@dataclass(frozen=True)
class StateRow:
    document: str  # canonical JSON text
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class OrchestrationRow:
    active_step: str | None = None
    recently_used_tools: tuple[str, ...] = ()
    sequence_index: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class FlowRow:
    checkpoint: FlowCheckpoint
    document: str  # canonical JSON text of checkpoint.data, returned as a fresh copy


@dataclass
class SessionPartition:
    """Every row one session owns, apart from KV and scoped state (keyed on their own).

    Stored objects are never mutated once stored; containers are copied on first write."""

    info: SessionInfo
    messages: list[StoredMessage] = field(default_factory=list)  # ascending seq
    by_turn: dict[tuple[str, int], int] = field(default_factory=dict)  # -> position
    hints: list[Hint] = field(default_factory=list)
    summary: Summary | None = None
    flows: dict[str, list[FlowRow]] = field(default_factory=dict)  # ascending version
    orchestration: OrchestrationRow | None = None
    #: seq -> when it was retracted; readers skip these messages, which stay in ``messages``.
    retracted: dict[int, datetime] = field(default_factory=dict)
    #: turn_id -> the canonical JSON text of its turn record.
    turns: dict[str, str] = field(default_factory=dict)

    def copy(self) -> SessionPartition:
        return SessionPartition(
            info=self.info,
            messages=list(self.messages),
            by_turn=dict(self.by_turn),
            hints=list(self.hints),
            summary=self.summary,
            flows={flow_id: list(rows) for flow_id, rows in self.flows.items()},
            orchestration=self.orchestration,
            retracted=dict(self.retracted),
            turns=dict(self.turns),
        )


@dataclass
class MemoryData:
    """Committed rows of one MemoryStateStore."""

    sessions: dict[SessionKey, SessionPartition] = field(default_factory=dict)
    kv: dict[ScopeKey, dict[tuple[str, str], KVRow]] = field(default_factory=dict)
    states: dict[StateKey, StateRow] = field(default_factory=dict)
    last_hint_id: int = 0
    #: The change feed per namespace, ascending seq, and each feed's last number (kept when
    #: events are swept, so a number is never reused).
    events: dict[str, list[ChangeEvent]] = field(default_factory=dict)
    event_heads: dict[str, int] = field(default_factory=dict)


class CowTable(Generic[K, V]):
    """A dict seen through a transaction's overlay of replaced and deleted entries."""

    def __init__(self, base: dict[K, V], copy: Callable[[V], V]) -> None:
        self._base = base
        self._copy = copy
        self._overlay: dict[K, V | _Deleted] = {}

    def get(self, key: K) -> V | None:
        if key in self._overlay:
            value = self._overlay[key]
            return None if value is _DELETED else value
        return self._base.get(key)

    def writable(self, key: K) -> V | None:
        """The entry as a private copy this transaction may mutate (None if absent)."""
        if key in self._overlay:
            value = self._overlay[key]
            return None if value is _DELETED else value
        if key not in self._base:
            return None
        private = self._copy(self._base[key])
        self._overlay[key] = private
        return private

    def put(self, key: K, value: V) -> None:
        self._overlay[key] = value

    def delete(self, key: K) -> bool:
        existed = self.get(key) is not None
        if existed or key in self._base:
            self._overlay[key] = _DELETED
        return existed

    def items(self) -> Iterator[tuple[K, V]]:
        for key, value in self._base.items():
            if key not in self._overlay:
                yield key, value
        for key, held in self._overlay.items():
            if held is not _DELETED:
                yield key, held

    def commit(self) -> None:
        for key, value in self._overlay.items():
            if value is _DELETED:
                self._base.pop(key, None)
            else:
                self._base[key] = value
        self._overlay.clear()


class Workspace:
    """One transaction's view of the data."""

    def __init__(self, data: MemoryData) -> None:
        self.data = data
        self.sessions: CowTable[SessionKey, SessionPartition] = CowTable(
            data.sessions, SessionPartition.copy
        )
        self.kv: CowTable[ScopeKey, dict[tuple[str, str], KVRow]] = CowTable(data.kv, dict)
        self.states: CowTable[StateKey, StateRow] = CowTable(data.states, lambda row: row)
        self.events: CowTable[str, list[ChangeEvent]] = CowTable(data.events, list)
        self.event_heads: CowTable[str, int] = CowTable(data.event_heads, lambda n: n)

    def next_hint_id(self) -> int:
        # Like an autoincrement column: ids are never reused, even after a rollback.
        self.data.last_hint_id += 1
        return self.data.last_hint_id

    def commit(self) -> None:
        self.sessions.commit()
        self.kv.commit()
        self.states.commit()
        self.events.commit()
        self.event_heads.commit()
