"""The control plane: describe, reset, compact and sweep, shaped like a
StateOperationResult so operators and programs read one report format.

A reset runs in one store transaction: it clears exactly what was asked or nothing. Every
transaction here goes through ``run_transaction``, so one that lost a deadlock runs again.
Requests that cannot be honoured exactly are refused (ResetRefusedError), never widened to
more state than was named.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

from statecore.core._change_events import NewEvent
from statecore.core._errors import ResetRefusedError, SessionNotFoundError, UnknownStoreError
from statecore.core._models import (
    ALL_STORES,
    SessionRef,
    StateOperationResult,
    StateStoreReport,
    SweepReport,
    validate_identifier,
)
from statecore.core._profile import SessionProfile
from statecore.core._tokens import TokenCounter
from statecore.operations._change_records import record, session_event
from statecore.operations._compaction import CompactionRequest, TransactionHook, compact_session
from statecore.operations._inspection import conversation_report, inspect_session
from statecore.operations._shares import invalidate_owner, invalidate_shares
from statecore.operations._summarizers import Summarizer
from statecore.store._base import StateStore, StoreTransaction
from statecore.store._bucket_owners import clear_store
from statecore.store._retry import run_transaction

#: Expired sessions deleted per transaction by ``sweep``.
SWEEP_BATCH = 200


async def describe(
    store: StateStore, ref: SessionRef, *, include_data: bool = False
) -> StateOperationResult:
    """Report every store of the session (ALL_STORES order). A session that does not exist
    is not an error: its stores are reported with ``exists=False``."""
    reports = await run_transaction(
        store, lambda tx: inspect_session(tx, ref, include_data=include_data)
    )
    return StateOperationResult(
        operation="describe", session_id=ref.session_id, namespace=ref.namespace, stores=reports
    )


def resolve_store_names(stores: Sequence[str] | None) -> list[str]:
    """The stores a request names, deduplicated in ALL_STORES order; None means all.

    UnknownStoreError for a name outside ALL_STORES; ResetRefusedError for an empty list,
    which names nothing (callers that mean "all" pass None)."""
    if stores is None:
        return list(ALL_STORES)
    if isinstance(stores, str):
        raise UnknownStoreError(f"stores must be a list of names, not the string {stores!r}")
    unknown = [s for s in stores if s not in ALL_STORES]
    if unknown:
        raise UnknownStoreError(
            f"unknown store(s) {unknown}; the stores are {list(ALL_STORES)}", stores=unknown
        )
    if not stores:
        raise ResetRefusedError(
            "stores=[] names no store; pass stores=None to reset every store of the session"
        )
    return [name for name in ALL_STORES if name in stores]


async def _clear_store(tx: StoreTransaction, ref: SessionRef, name: str) -> dict[str, int]:
    """Clear one store of one session; returns what was removed, for the report."""
    if name == "conversation":
        messages = await tx.conversation.clear(ref)
        # Turn records name seqs of the log just deleted: a re-sent turn id must run afresh.
        # The conversation's KV buckets go too (the latest turn number).
        records = await tx.turns.clear(ref)
        records += await clear_store(tx.kv, ref.kv_scope, "conversation")
        return {"removed": messages, "turn_records_removed": records}
    if name == "state":
        removed = int(await tx.state.delete(ref.namespace, ref.session_id, ref.agent_id))
    elif name == "flow":
        removed = await tx.flow.clear(ref)
    elif name == "orchestration":
        removed = int(await tx.orchestration.reset(ref))
    else:  # kv, tools and task: partitions of the session's KV scope (see kv_partition)
        removed = await clear_store(tx.kv, ref.kv_scope, name)
    return {"removed": removed}


async def reset_session_stores(
    tx: StoreTransaction, ref: SessionRef, names: Sequence[str]
) -> StateOperationResult:
    """Clear the named stores of one session inside ``tx``. The session header (TTL,
    creation time) stays; every row of the named stores goes, nothing else is touched."""
    before = {r.name: r for r in await inspect_session(tx, ref)}
    result = StateOperationResult(
        operation="reset", session_id=ref.session_id, namespace=ref.namespace
    )
    for name in names:
        report = before[name]
        if not report.exists:
            result.missing.append(name)
        else:
            report.metadata.update(await _clear_store(tx, ref, name))
            result.cleared.append(name)
        # Tokens name the state as it was when shared; after a reset they are refused, even
        # when the store was already empty (a new document may be written next).
        if await invalidate_shares(tx, ref, name):
            report.metadata["shares_invalidated"] = True
        result.stores.append(report)
    removed = {r.name: r.metadata.get("removed", 0) for r in result.stores}
    await record(tx, ref.namespace, [session_event("reset", ref, stores=removed)])
    return result


async def reset(
    store: StateStore,
    ref: SessionRef | None,
    *,
    stores: Sequence[str] | None = None,
    namespace: str | None = None,
    all_sessions: bool = False,
) -> StateOperationResult:
    """Destroy state, precisely.

    - ``reset(store, ref)``: every store of that one session;
    - ``reset(store, ref, stores=[...])``: exactly the named stores of that session;
    - ``reset(store, None, namespace=ns, all_sessions=True)``: the whole namespace.

    ``cleared`` names the stores that held data and were cleared, ``missing`` the requested
    stores that held nothing; ``stores`` reports what each held before. Unknown store names
    raise UnknownStoreError and anything ambiguous raises ResetRefusedError, both before
    anything is cleared.
    """
    names = resolve_store_names(stores)
    if ref is not None:
        if all_sessions:
            raise ResetRefusedError(
                "all_sessions=True resets a whole namespace; pass ref=None and namespace=..."
                " for that, or drop all_sessions to reset only this session"
            )
        if namespace is not None and namespace != ref.namespace:
            raise ResetRefusedError(
                f"namespace {namespace!r} differs from the session's {ref.namespace!r}; "
                "name one target only"
            )
        return await run_transaction(store, lambda tx: reset_session_stores(tx, ref, names))
    if not all_sessions:
        raise ResetRefusedError(
            "no session given: resetting every session of a namespace needs all_sessions=True"
            " and namespace=... stated explicitly"
        )
    if namespace is None:
        raise ResetRefusedError("a namespace reset needs the namespace named explicitly")
    validate_identifier(namespace, "namespace")
    if len(names) != len(ALL_STORES):
        # The namespace-wide stores (shared KV, scoped states of any task) do not split by
        # the per-session store names, so a partial namespace reset cannot be exact.
        raise ResetRefusedError(
            f"a namespace reset clears every store; stores={list(names)} cannot be honoured "
            "exactly across a namespace. Reset the sessions one by one instead"
        )
    return await _reset_namespace(store, namespace)


async def _delete_namespace(tx: StoreTransaction, namespace: str) -> tuple[bool, int]:
    """(whether the namespace held anything, sessions removed)."""
    existed = namespace in await tx.sessions.namespaces()
    removed = await tx.sessions.delete_namespace(namespace) if existed else 0
    if existed:
        await record(tx, namespace, [NewEvent.of("reset", None, sessions=removed, all=True)])
    return existed, removed


async def _reset_namespace(store: StateStore, namespace: str) -> StateOperationResult:
    existed, removed = await run_transaction(store, lambda tx: _delete_namespace(tx, namespace))
    reports = [StateStoreReport(name=name, exists=existed) for name in ALL_STORES]
    reports[0].metadata["sessions_removed"] = removed
    return StateOperationResult(
        operation="reset",
        namespace=namespace,
        stores=reports,
        cleared=list(ALL_STORES) if existed else [],
        missing=[] if existed else list(ALL_STORES),
    )


async def compact(
    store: StateStore,
    ref: SessionRef,
    request: CompactionRequest,
    *,
    summarizer: Summarizer | None = None,
    counter: TokenCounter,
    profile: SessionProfile | None = None,
) -> StateOperationResult:
    """Compact the conversation of one session (never deletes messages).

    ``summarizer`` folds what leaves the window into the summary for ``summarize``; None
    means the extractive summarizer. This is ``compact_session`` (two short transactions with
    the summarizer between them) with the conversation's report taken in each: the report's
    metadata holds ``before`` and ``after`` (the window's counters) and what the compaction
    decided. A session that does not exist is reported in ``missing``."""
    result = StateOperationResult(
        operation="compact", session_id=ref.session_id, namespace=ref.namespace
    )
    # Keyed by phase: a transaction that runs again replaces its own report.
    reports: dict[str, StateStoreReport] = {}

    def report_as(phase: str) -> TransactionHook:
        async def report(tx: StoreTransaction) -> None:
            info = await tx.sessions.get(ref)
            if info is None:  # compaction raises first; this keeps the types honest
                raise SessionNotFoundError(f"session {ref} was deleted during compaction")
            reports[phase] = await conversation_report(tx, ref, info, include_data=False)

        return report

    try:
        outcome = await compact_session(
            store,
            ref,
            request,
            summarizer=summarizer,
            counter=counter,
            profile=profile,
            on_plan=report_as("before"),
            on_commit=report_as("after"),
        )
    except SessionNotFoundError:
        result.missing.append("conversation")
        result.stores.append(StateStoreReport(name="conversation"))
        return result
    before, after = reports["before"], reports["after"]
    after.metadata = {
        "before": before.metadata,
        "after": after.metadata,
        **outcome.model_dump(mode="json"),
    }
    result.stores.append(after)
    if outcome.changed:
        # ``compacted`` names what changed; a compaction with nothing to do says why in
        # the store's metadata (``reason``) instead.
        result.compacted.append("conversation")
    return result


async def sweep(store: StateStore, *, now: datetime | None = None) -> SweepReport:
    """Delete sessions idle past their TTL (with everything they own) and expired KV keys.

    ``now`` defaults to the store's clock. Sessions go in batches, one transaction each, and
    are checked and deleted in the same transaction so a session touched meanwhile stays."""
    report = SweepReport()
    while True:
        now, batch, deleted = await run_transaction(store, functools.partial(_sweep_batch, now=now))
        report.sessions.extend(deleted)
        if len(batch) < SWEEP_BATCH:
            break
    assert now is not None  # the first batch settles it from the store's clock
    report.kv_keys = await run_transaction(store, lambda tx: tx.kv.sweep_expired(now))
    return report


async def _sweep_batch(
    tx: StoreTransaction, *, now: datetime | None
) -> tuple[datetime, list[SessionRef], list[SessionRef]]:
    """One batch of expired sessions, deleted: (the moment used, the batch, those deleted)."""
    moment = now or tx.now
    batch = await tx.sessions.expired(moment, limit=SWEEP_BATCH)
    deleted = [ref for ref in batch if await tx.sessions.delete(ref)]
    for ref in deleted:
        await invalidate_owner(tx, ref)
    for ref in sorted(deleted, key=lambda r: (r.namespace, r.agent_id, r.session_id)):
        await record(tx, ref.namespace, [session_event("expired", ref)])
    return moment, batch, deleted


__all__ = [
    "SWEEP_BATCH",
    "compact",
    "describe",
    "reset",
    "reset_session_stores",
    "resolve_store_names",
    "sweep",
]
