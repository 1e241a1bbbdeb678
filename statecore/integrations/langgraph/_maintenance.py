"""Pruning a thread without breaking what is kept: which checkpoints a DeltaChannel thread
still needs, and which blobs no kept checkpoint (or list snapshot joined from them) uses."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from statecore.integrations.langgraph import _rows as rows
from statecore.integrations.langgraph import _segments as segments
from statecore.integrations.langgraph._codec import EMPTY, ValueCodec
from statecore.integrations.langgraph._keys import name_key

#: Metadata key in which LangGraph counts the updates of a thread's DeltaChannels.
DELTA_COUNTERS = "counters_since_delta_snapshot"


async def keep_latest(conn: AsyncConnection, codec: ValueCodec, scope: rows.Scope) -> None:
    """Keep the namespace's newest checkpoint and, for each DeltaChannel it names, every
    ancestor back to the nearest one storing that channel's value; delete the rest."""
    every = await rows.checkpoint_rows(conn, scope, at_or_below=None, page=2**62)
    if not every:
        return
    by_id = {r.checkpoint_id: r for r in every}
    head = every[0]
    kept = {head.checkpoint_id}
    meta = codec.load(head.meta_type, head.meta, "checkpoint metadata")
    delta = set((meta.get(DELTA_COUNTERS) or {}).keys())
    if delta:
        bodies = {
            r.checkpoint_id: codec.load(r.checkpoint_type, r.checkpoint, "checkpoint")
            for r in every
        }
        wanted = [
            (name_key(ch, "channel name"), str(v))
            for body in bodies.values()
            for ch, v in body.get("channel_versions", {}).items()
            if ch in delta
        ]
        stored = await rows.blobs_of(conn, scope, wanted, with_values=False)

        def seeded(checkpoint_id: str, ch: str) -> bool:
            version = bodies[checkpoint_id].get("channel_versions", {}).get(ch)
            blob = stored.get((name_key(ch, "channel name"), str(version)))
            return version is not None and blob is not None and blob[0] != EMPTY

        remaining = {ch for ch in delta if not seeded(head.checkpoint_id, ch)}
        cursor = head.parent_checkpoint_id
        while cursor is not None and cursor in by_id and remaining:
            kept.add(cursor)
            remaining = {ch for ch in remaining if not seeded(cursor, ch)}
            cursor = by_id[cursor].parent_checkpoint_id
    removed = [r.checkpoint_id for r in every if r.checkpoint_id not in kept]
    if removed:
        await rows.delete_checkpoints(conn, scope, removed)
        await rows.orphan_children(conn, scope, removed)
        await collect_blobs(conn, codec, scope)


async def collect_blobs(conn: AsyncConnection, codec: ValueCodec, scope: rows.Scope) -> None:
    """Delete the blobs of a namespace that no checkpoint of it names any more."""
    referenced: set[tuple[str, str]] = set()
    for r in await rows.checkpoint_rows(conn, scope, at_or_below=None, page=2**62):
        body = codec.load(r.checkpoint_type, r.checkpoint, "checkpoint")
        for ch, version in body.get("channel_versions", {}).items():
            referenced.add((name_key(ch, "channel name"), str(version)))
    # A kept list snapshot needs every earlier segment it is joined from.
    bases = {}
    for r in await rows.segments_of(conn, scope, None, segments.SEGMENT_PREFIX):
        segment = codec.load(
            r.value_type[len(segments.SEGMENT_PREFIX) :], r.value, "list snapshot segment"
        )
        bases[(r.channel_key, r.version)] = segment["base"]
    for channel_key, version in list(referenced):
        base = bases.get((channel_key, version))
        while base is not None and (channel_key, base) not in referenced:
            referenced.add((channel_key, base))
            base = bases.get((channel_key, base))
    garbage = [k for k in await rows.blob_keys(conn, scope) if k not in referenced]
    if garbage:
        await rows.delete_blobs(conn, scope, garbage)
