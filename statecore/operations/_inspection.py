"""What a session holds, store by store: the StateStoreReport of each of ALL_STORES.

Counts come from counters and count queries (session header, KV/flow counts), never from
reading the log. With ``include_data`` the reports carry the data itself, capped per store so
a whole describe result stays well under Temporal's 512 KiB payload warning; a report says
``data_truncated`` in its metadata when it holds less than there is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from statecore.core._models import ALL_STORES, SessionInfo, SessionRef, StateStoreReport
from statecore.operations._share_listing import share_summaries
from statecore.operations._turn_commit import TURN_META_BUCKET
from statecore.store._base import StoreTransaction
from statecore.store._bucket_owners import (
    KV_STORES,
    TOOL_BUCKET_PREFIX,
    bucket_key_counts,
    bucket_store,
)

#: Bytes of data the conversation report may carry (the window, summary, hints, prompt).
CONVERSATION_DATA_BUDGET = 160 * 1024
#: Bytes of data each other store's report may carry. 160 KiB + 6 x 24 KiB = 304 KiB.
STORE_DATA_BUDGET = 24 * 1024
#: Most window messages a describe reads, whatever their size.
MAX_DESCRIBED_MESSAGES = 500
#: Longest name list (buckets, flows, tools) put in metadata.
MAX_LISTED_NAMES = 100


def json_size(value: Any) -> int:
    """Size in bytes of ``value`` as compact JSON with non-ASCII escaped: the largest form a
    payload converter may produce (one CJK character costs 6 bytes, not 3)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=True))


def fit_items(items: Sequence[JsonValue], budget: int) -> tuple[list[JsonValue], bool]:
    """The leading items whose JSON fits ``budget`` bytes, and whether any were left out."""
    kept: list[JsonValue] = []
    used = 0
    for item in items:
        size = json_size(item) + 1
        if used + size > budget:
            return kept, True
        kept.append(item)
        used += size
    return kept, False


async def count_turn_records(
    tx: StoreTransaction, ref: SessionRef, bucket_counts: dict[str, int]
) -> int:
    """Committed turns on record: the turn record store's, plus any the session's KV scope
    still holds in the conversation's buckets from before that store (``bucket_counts``
    from ``bucket_key_counts``), bookkeeping left out, so 10 turns report 10."""
    legacy = sum(
        count
        for bucket, count in bucket_counts.items()
        if bucket_store(bucket) == "conversation" and bucket != TURN_META_BUCKET
    )
    return await tx.turns.count(ref) + legacy


def _names(names: Sequence[str]) -> list[JsonValue]:
    return list(names[:MAX_LISTED_NAMES])


async def conversation_report(
    tx: StoreTransaction,
    ref: SessionRef,
    info: SessionInfo,
    include_data: bool,
    *,
    turn_records: int | None = None,
) -> StateStoreReport:
    """The log's counters from the session header; ``turn_records`` (one per committed turn
    id, bookkeeping entries left out) is counted when not given."""
    conv = tx.conversation
    if turn_records is None:
        turn_records = await count_turn_records(
            tx, ref, await bucket_key_counts(tx.kv, ref.kv_scope)
        )
    hints = await conv.hints(ref)
    summary = await conv.summary(ref)
    start = info.window_start_seq
    window_messages = max(0, info.last_seq - start + 1)
    window_tokens = info.token_total
    if start > 1 and info.last_seq > 0:
        # Tokens before the window are the cumulative total of the message just before it.
        before = await conv.messages(
            ref, from_seq=start - 1, to_seq=start - 1, limit=1, include_retracted=True
        )
        window_tokens -= before[0].cumulative_tokens if before else 0
    metadata: dict[str, JsonValue] = {
        "last_seq": info.last_seq,
        "window_start_seq": start,
        "window_messages": window_messages,
        "window_tokens": window_tokens,
        "has_summary": summary is not None,
        "summary_through_seq": summary.through_seq if summary else None,
        "hints": len(hints),
        "system_prompt_set": info.system_prompt is not None,
        "turn_records": turn_records,
        # Taken back by a framework session's pop_item: still in the log (and in ``items``),
        # hidden from every reader until a reset.
        "retracted": len(await conv.retracted(ref)) if info.message_count else 0,
    }
    report = StateStoreReport(
        name="conversation",
        exists=bool(
            info.message_count or hints or summary or info.system_prompt is not None or turn_records
        ),
        items=info.message_count,
        tokens=info.token_total,
        metadata=metadata,
    )
    if include_data:
        fixed: dict[str, JsonValue] = {
            "system_prompt": info.system_prompt,
            "summary": summary.model_dump(mode="json") if summary else None,
            "hints": [h.model_dump(mode="json") for h in hints],
        }
        room = CONVERSATION_DATA_BUDGET - json_size(fixed)
        window = await conv.tail(ref, max_messages=MAX_DESCRIBED_MESSAGES)
        newest_first = [m.model_dump(mode="json") for m in reversed(window)]
        kept, _ = fit_items(newest_first, max(room, 0))
        kept.reverse()
        fixed["messages"] = kept
        report.metadata["data_messages"] = len(kept)
        report.metadata["data_truncated"] = len(kept) < window_messages
        report.data = fixed
    return report


def _kv_data(entries: list[JsonValue], metadata: dict[str, JsonValue]) -> JsonValue:
    kept, truncated = fit_items(entries, STORE_DATA_BUDGET)
    metadata["data_truncated"] = truncated
    return kept


async def kv_reports(
    tx: StoreTransaction, ref: SessionRef, counts: dict[str, int], include_data: bool
) -> list[StateStoreReport]:
    """Reports ``kv`` (the user's buckets), ``tools`` and ``task`` of the session scope,
    from ``counts`` (``store_key_counts``)."""
    kv, scope = tx.kv, ref.kv_scope
    buckets = await kv.buckets(scope)
    metadata: dict[str, dict[str, JsonValue]] = {
        "kv": {"buckets": _names([b for b in buckets if bucket_store(b) == "kv"])},
        "tools": {
            "tools": _names(
                [b.removeprefix(TOOL_BUCKET_PREFIX) for b in buckets if bucket_store(b) == "tools"]
            )
        },
        "task": {},
    }
    reports = {
        name: StateStoreReport(
            name=name, exists=counts[name] > 0, items=counts[name], metadata=metadata[name]
        )
        for name in ("kv", "tools", "task")
    }
    if include_data:
        grouped: dict[str, list[JsonValue]] = {"kv": [], "tools": [], "task": []}
        for entry in await kv.entries(scope):
            owner = bucket_store(entry.bucket)
            if owner in grouped:  # turn records are the conversation's bookkeeping
                grouped[owner].append(entry.model_dump(mode="json"))
        for name, report in reports.items():
            report.data = _kv_data(grouped[name], report.metadata)
    return [reports["kv"], reports["tools"], reports["task"]]


async def state_report(
    tx: StoreTransaction, ref: SessionRef, include_data: bool
) -> StateStoreReport:
    """The scoped-state document of (task_id=session_id, agent_id)."""
    doc = await tx.state.get(ref.namespace, ref.session_id, ref.agent_id)
    report = StateStoreReport(name="state", exists=doc is not None, items=int(doc is not None))
    if doc is not None:
        size = json_size(doc.state)
        report.metadata = {
            "task_id": doc.task_id,
            "agent_id": doc.agent_id,
            "version": doc.version,
            "bytes": size,
            "updated_at": doc.updated_at.isoformat(),
        }
        if include_data:
            fits = size <= STORE_DATA_BUDGET
            report.metadata["data_truncated"] = not fits
            report.data = doc.state if fits else None
    return report


async def flow_report(
    tx: StoreTransaction, ref: SessionRef, include_data: bool
) -> StateStoreReport:
    count = await tx.flow.count(ref)
    flows = await tx.flow.flows(ref) if count else []
    report = StateStoreReport(
        name="flow", exists=count > 0, items=count, metadata={"flows": _names(flows)}
    )
    if include_data:
        latest = []
        for flow_id in flows[:MAX_LISTED_NAMES]:
            checkpoint = await tx.flow.latest(ref, flow_id)
            if checkpoint is not None:
                latest.append(checkpoint.model_dump(mode="json"))
        kept, truncated = fit_items(latest, STORE_DATA_BUDGET)
        report.metadata["data_truncated"] = truncated or len(flows) > MAX_LISTED_NAMES
        report.data = kept
    return report


async def orchestration_report(
    tx: StoreTransaction, ref: SessionRef, include_data: bool
) -> StateStoreReport:
    state = await tx.orchestration.get(ref)
    report = StateStoreReport(name="orchestration", exists=state is not None)
    if state is not None:
        report.items = 1
        report.tokens = state.cumulative_token_usage.total_tokens
        report.metadata = {
            "active_step": state.active_step,
            "sequence_index": state.sequence_index,
            "recently_used_tools": list(state.recently_used_tools),
            "last_accessed": state.last_accessed.isoformat(),
            "ttl_seconds": state.ttl_seconds,
        }
        if include_data:
            report.data = state.model_dump(mode="json")
    return report


async def inspect_session(
    tx: StoreTransaction,
    ref: SessionRef,
    *,
    include_data: bool = False,
    info: SessionInfo | None = None,
) -> list[StateStoreReport]:
    """One report per store of ALL_STORES, in that order.

    Without a session header every per-session store is reported absent; the scoped state
    is looked up anyway, because it is keyed by (task, agent) and can exist on its own."""
    if info is None:
        info = await tx.sessions.get(ref)
    state = await state_report(tx, ref, include_data)
    if info is None:
        absent = {name: StateStoreReport(name=name) for name in ALL_STORES}
        absent["state"] = state
        return [absent[name] for name in ALL_STORES]
    buckets = await bucket_key_counts(tx.kv, ref.kv_scope)
    counts = dict.fromkeys(KV_STORES, 0)
    for bucket, count in buckets.items():
        counts[bucket_store(bucket)] += count
    kv, tools, task = await kv_reports(tx, ref, counts, include_data)
    reports = {
        "conversation": await conversation_report(
            tx, ref, info, include_data, turn_records=await count_turn_records(tx, ref, buckets)
        ),
        "kv": kv,
        "state": state,
        "flow": await flow_report(tx, ref, include_data),
        "orchestration": await orchestration_report(tx, ref, include_data),
        "tools": tools,
        "task": task,
    }
    for kind in ("state", "kv"):
        # Who was given access to this session's state, and who used it (operators revoke
        # by share_id: ``statecore shares revoke``).
        shares = await share_summaries(tx, ref, kind)  # type: ignore[arg-type]
        if shares:
            reports[kind].metadata["shares"] = shares[-MAX_LISTED_NAMES:]
    return [reports[name] for name in ALL_STORES]
