"""The change feed's events: what a committed change touched, never what it wrote.

Every committed change of a namespace (a turn's messages, KV writes, scoped-state document,
flow checkpoints, orchestration update and share changes; a reset, a compaction, a sweep, an
import) is recorded as events in the same transaction that commits it, so an event exists
exactly when its change does: never before the commit, never lost after it. Events carry ids
and sizes; a reader that wants the content fetches it by those ids.

Each namespace numbers its events 1, 2, 3, ... with no gaps, in commit order (see
``statecore.store.sql._events`` for how concurrent commits are kept in order). A reader that
has handled every event up to ``seq`` reads ``after=seq`` next and misses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import Field, JsonValue

from statecore.core._limits import MAX_DETAIL_BYTES
from statecore.core._models import SessionRef, StatecoreModel

EventKind = Literal[
    "messages",
    "kv",
    "state",
    "flow",
    "orchestration",
    "share",
    "reset",
    "compaction",
    "import",
    "expired",
    "hint",
]


class NewEvent(StatecoreModel):
    """An event about to be recorded (the store assigns ``seq`` and ``created_at``)."""

    kind: EventKind
    agent_id: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    detail: dict[str, JsonValue] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        kind: EventKind,
        ref: SessionRef | None,
        *,
        turn_id: str | None = None,
        **detail: JsonValue,
    ) -> NewEvent:
        # Built by statecore from already validated ids on every commit: skipping
        # validation here is most of what keeps the feed's cost per turn small.
        return cls.model_construct(
            kind=kind,
            agent_id=ref.agent_id if ref else None,
            session_id=ref.session_id if ref else None,
            turn_id=turn_id,
            detail=detail,
        )

    def detail_json(self) -> str:
        text = json.dumps(self.detail, separators=(",", ":"), sort_keys=True)
        if len(text) > MAX_DETAIL_BYTES:
            raise ValueError(f"an event's detail is {len(text)} bytes; events carry ids only")
        return text


class ChangeEvent(StatecoreModel):
    """A recorded event: its place in the namespace's feed, what changed, when it committed."""

    namespace: str
    seq: int
    kind: EventKind
    agent_id: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    detail: dict[str, JsonValue] = Field(default_factory=dict)
    created_at: datetime


def json_bytes(value: object) -> int:
    """The size of ``value`` as compact JSON (what an event reports as ``bytes``)."""
    if isinstance(value, bytes | bytearray):
        return len(value)
    return len(json.dumps(value, separators=(",", ":")).encode("utf-8"))


def assign(
    namespace: str, first_seq: int, now: datetime, events: Sequence[NewEvent]
) -> list[ChangeEvent]:
    """The recorded form of ``events``, numbered from ``first_seq``."""
    return [
        ChangeEvent(namespace=namespace, seq=first_seq + i, created_at=now, **e.model_dump())
        for i, e in enumerate(events)
    ]
