"""DeltaChannel snapshots of a list, stored as the segment added since the last snapshot.

DeltaChannel writes only new items per step, but every ``snapshot_frequency`` updates it
hands the saver a ``_DeltaSnapshot`` of the whole list (so reads need not walk the whole
history), and a saver that stores it as it comes writes the conversation again. When the
list begins with exactly the items of the channel's previous snapshot, statecore stores only
the items after them and a reference to that snapshot; a read follows the references and
joins the segments. A snapshot whose list does not extend the previous one (messages
removed or edited) is stored whole. Either way a turn writes bytes in proportion to what it
added, not to the length of the conversation.

Whether the list extends the previous snapshot is decided by a running SHA-256 over the
serialised items, stored with each segment, so the previous items are never read back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

#: Type tag of a segment blob, followed by the serializer's own tag for its payload.
SEGMENT_PREFIX = "seg:"


@dataclass(frozen=True)
class ListSnapshot:
    """A list snapshot about to be stored: its items and the running digest after each."""

    items: list[Any]
    running: list[str]


def plan(serde: SerializerProtocol, items: list[Any]) -> ListSnapshot:
    running: list[str] = []
    state = b""
    for item in items:
        kind, data = serde.dumps_typed(item)
        state = hashlib.sha256(
            state + kind.encode() + b"\0" + hashlib.sha256(data).digest()
        ).digest()
        running.append(state.hex())
    return ListSnapshot(items, running)


def segment_value(
    snapshot: ListSnapshot, previous: Mapping[str, Any] | None, previous_version: str | None
) -> dict[str, Any]:
    """What to store for ``snapshot``, given the header of the channel's newest segment."""
    base, start = None, 0
    if previous is not None and previous_version is not None:
        length = previous.get("length")
        if (
            isinstance(length, int)
            and 0 < length <= len(snapshot.items)
            and snapshot.running[length - 1] == previous.get("digest")
        ):
            base, start = previous_version, length
    return {
        "base": base,
        "length": len(snapshot.items),
        "digest": snapshot.running[-1] if snapshot.running else "",
        "items": snapshot.items[start:],
    }


def join(version: str, segments: Mapping[str, Mapping[str, Any]]) -> list[Any] | None:
    """The whole list of the segment at ``version``, or None when a base is missing."""
    parts: list[Sequence[Any]] = []
    cursor: str | None = version
    seen: set[str] = set()
    while cursor is not None:
        segment = segments.get(cursor)
        if segment is None or cursor in seen:
            return None
        seen.add(cursor)
        parts.append(segment["items"])
        cursor = segment["base"]
    joined: list[Any] = []
    for part in reversed(parts):
        joined.extend(part)
    return joined
