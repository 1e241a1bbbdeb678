"""DeltaChannel history: the writes of a checkpoint's ancestors back to a stored value.

LangGraph rebuilds a DeltaChannel by replaying, oldest first, the writes of each ancestor of
the checkpoint it loads, back to the nearest ancestor that stores a value for the channel
(the seed). The walk follows parent ids one page of checkpoints at a time, looks up which
ancestors store a value with one query per page, and reads the walked ancestors' writes
together: its cost depends on the distance to the last snapshot, not on the thread's length.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite
from sqlalchemy.ext.asyncio import AsyncConnection

from statecore.integrations.langgraph import _rows as rows
from statecore.integrations.langgraph._codec import EMPTY, ValueCodec
from statecore.integrations.langgraph._keys import name_key

#: Checkpoints read per query while walking a parent chain.
PAGE_SIZE = 100


async def delta_history(
    conn: AsyncConnection,
    codec: ValueCodec,
    scope: rows.Scope,
    target: str | None,
    channels: list[str],
) -> Mapping[str, DeltaChannelHistory]:
    channel_keys = {ch: name_key(ch, "channel name") for ch in channels}
    page = await rows.checkpoint_rows(conn, scope, at_or_below=target, page=PAGE_SIZE)
    known = {r.checkpoint_id: r for r in page}
    head = page[0] if page and (target is None or page[0].checkpoint_id == target) else None
    remaining = set(channels)
    chain_by_ch: dict[str, list[str]] = {ch: [] for ch in channels}
    seed_at: dict[str, tuple[str, str]] = {}
    cursor = head.parent_checkpoint_id if head is not None else None
    while cursor is not None and remaining:
        # The page of ancestors from the cursor down, fetched when the walk leaves it.
        if cursor not in known:
            more = await rows.checkpoint_rows(conn, scope, at_or_below=cursor, page=PAGE_SIZE)
            known.update({r.checkpoint_id: r for r in more})
            if cursor not in known:
                break
        walk: list[tuple[str, dict[str, str]]] = []
        while cursor is not None and cursor in known:
            r = known[cursor]
            body = codec.load(r.checkpoint_type, r.checkpoint, "checkpoint")
            versions = {
                ch: str(v) for ch, v in body.get("channel_versions", {}).items() if ch in remaining
            }
            walk.append((cursor, versions))
            cursor = r.parent_checkpoint_id
        stored = await rows.blobs_of(
            conn,
            scope,
            [(channel_keys[ch], v) for _, vs in walk for ch, v in vs.items()],
            with_values=False,
        )
        for checkpoint_id, versions in walk:
            if not remaining:
                break
            for ch in list(remaining):
                chain_by_ch[ch].append(checkpoint_id)
                version = versions.get(ch)
                found = stored.get((channel_keys[ch], version)) if version else None
                if found is not None and found[0] != EMPTY:
                    seed_at[ch] = (channel_keys[ch], cast(str, version))
                    remaining.discard(ch)
    walked = list(dict.fromkeys(i for ids in chain_by_ch.values() for i in ids))
    by_checkpoint: dict[str, list[tuple[Any, ...]]] = {}
    for w in await rows.writes_of(conn, scope, walked) if walked else []:
        if w.channel.decode("utf-8") in chain_by_ch:
            by_checkpoint.setdefault(w.checkpoint_id, []).append(
                (w.task_id, w.task_path, w.idx, w.channel, w.value_type, w.value)
            )
    seeds = (
        await codec.values(conn, scope, await rows.blobs_of(conn, scope, list(seed_at.values())))
        if seed_at
        else {}
    )
    result: dict[str, DeltaChannelHistory] = {}
    pending_by_checkpoint = {
        cid: codec.pending(stored_writes) for cid, stored_writes in by_checkpoint.items()
    }
    for ch in channels:
        collected: list[PendingWrite] = []
        for checkpoint_id in reversed(chain_by_ch[ch]):
            pending = pending_by_checkpoint.get(checkpoint_id, [])
            collected.extend(w for w in pending if w[1] == ch)
        entry: DeltaChannelHistory = {"writes": collected}
        if ch in seed_at:
            entry["seed"] = seeds[seed_at[ch]]
        result[ch] = entry
    return result
