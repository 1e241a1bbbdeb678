"""How LangGraph values become stored bytes and back, for StatecoreSaver.

Through the saver's ``serde`` (LangGraph's own serializer), with the saver's size limit
checked before anything is written, stored bytes that no longer deserialise reported as
``CorruptCheckpointError``, DeltaChannel list snapshots stored as segments (``segments``)
and joined again on read, and pending writes put in the order LangGraph applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.base import PendingWrite, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from sqlalchemy.ext.asyncio import AsyncConnection

from statecore.core._errors import CheckpointTooLargeError, CorruptCheckpointError
from statecore.integrations.langgraph import _rows as rows
from statecore.integrations.langgraph import _segments as segments

#: The type tag of a blob of a channel versioned without a value.
EMPTY = "empty"


class ValueCodec:
    """Serialises and deserialises one saver's values (see the module docstring)."""

    def __init__(self, serde: SerializerProtocol, max_value_bytes: int) -> None:
        self.serde = serde
        self.max_value_bytes = max_value_bytes

    def dump(self, value: Any, what: str) -> tuple[str, bytes]:
        kind, data = self.serde.dumps_typed(value)
        if len(data) > self.max_value_bytes:
            raise CheckpointTooLargeError(
                f"{what} serialises to {len(data)} bytes, over this saver's limit of "
                f"{self.max_value_bytes}; keep large data outside the graph state and store "
                "a reference to it. Nothing was written",
                size=len(data),
                limit=self.max_value_bytes,
            )
        return kind, data

    def load(self, kind: str, data: bytes, what: str) -> Any:
        try:
            return self.serde.loads_typed((kind, data))
        except Exception as exc:
            # Any failure of the serializer on stored bytes means the row is damaged (or was
            # written with another serde); the caller must learn which row, not a msgpack
            # internals message.
            raise CorruptCheckpointError(
                f"stored {what} cannot be read back ({type(exc).__name__}: {exc}); the row "
                "is damaged or was written with another serializer. Restore it from a "
                "backup or delete the thread",
                what=what,
            ) from exc

    async def fill_segment(
        self,
        conn: AsyncConnection,
        scope: rows.Scope,
        record: dict[str, Any],
        snapshot: segments.ListSnapshot,
    ) -> None:
        """Fill ``record`` with the segment of ``snapshot`` after the channel's newest one."""
        previous = await rows.latest_segment(
            conn, scope, record["channel_key"], segments.SEGMENT_PREFIX
        )
        header = None
        if previous is not None:
            header = self.load(
                previous.value_type[len(segments.SEGMENT_PREFIX) :],
                previous.value,
                "list snapshot segment",
            )
        value = segments.segment_value(
            snapshot, header, previous.version if previous is not None else None
        )
        kind, data = self.dump(value, "a list snapshot segment")
        record["value_type"], record["value"] = segments.SEGMENT_PREFIX + kind, data

    async def values(
        self,
        conn: AsyncConnection,
        scope: rows.Scope,
        stored: Mapping[tuple[str, str], tuple[str, bytes]],
    ) -> dict[tuple[str, str], Any]:
        """The values of stored blobs by (channel_key, version); empty ones are left out and
        list-snapshot segments are joined into their whole list."""
        values: dict[tuple[str, str], Any] = {}
        segmented = {
            key for key, (kind, _) in stored.items() if kind.startswith(segments.SEGMENT_PREFIX)
        }
        for key, (kind, data) in stored.items():
            if kind != EMPTY and key not in segmented:
                values[key] = self.load(kind, data, "channel value")
        if segmented:
            by_channel: dict[str, dict[str, Any]] = {}
            found = await rows.segments_of(
                conn, scope, sorted({ch for ch, _ in segmented}), segments.SEGMENT_PREFIX
            )
            for r in found:
                by_channel.setdefault(r.channel_key, {})[r.version] = self.load(
                    r.value_type[len(segments.SEGMENT_PREFIX) :], r.value, "list snapshot segment"
                )
            for channel_key, version in segmented:
                items = segments.join(version, by_channel.get(channel_key, {}))
                if items is None:
                    raise CorruptCheckpointError(
                        "a list snapshot's earlier segment is missing; the thread's blobs "
                        "were deleted in part. Restore them from a backup or delete the thread",
                        version=version,
                    )
                values[(channel_key, version)] = _DeltaSnapshot(items)
        return values

    def pending(self, stored: list[tuple[Any, ...]]) -> list[PendingWrite]:
        """Writes as (task_id, channel, value), in ``writes_sort_key`` order."""
        decoded = [
            (task_id.decode("utf-8"), path.decode("utf-8"), idx, channel.decode("utf-8"), k, v)
            for task_id, path, idx, channel, k, v in stored
        ]
        decoded.sort(key=lambda w: writes_sort_key(w[1], w[0], w[2]))
        return [
            (task_id, channel, self.load(kind, data, f"write to channel {channel!r}"))
            for task_id, _, _, channel, kind, data in decoded
        ]
