"""Portable export and import of sessions and namespaces: their whole state, saved and loaded.

``export_session`` reads a consistent snapshot in one transaction; ``import_session`` writes
it back verbatim (seqs, turn ids, token counts, KV revisions, flow history) in one
transaction, so a failed import leaves the target exactly as it was. Each goes through
``run_transaction``: one that lost a deadlock or found SQLite busy runs again whole.
``fork_session`` is time travel: a new session that starts from an old flow checkpoint. The
file format lives in ``statecore.operations._bundle_format`` and is re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statecore.core._change_events import NewEvent
from statecore.core._errors import (
    AlreadyExistsError,
    BundleError,
    InvalidInputError,
    SessionNotFoundError,
)
from statecore.core._models import (
    Hint,
    KVEntry,
    KVScope,
    OrchestrationState,
    SessionInfo,
    SessionRef,
    StateOperationResult,
    StoredMessage,
    validate_identifier,
)
from statecore.operations._bundle_format import (
    BUNDLE_SCHEMA_VERSION,
    NAMESPACE_FORMAT,
    SESSION_FORMAT,
    SUPPORTED_SCHEMA_VERSIONS,
    TURN_RECORD_BUCKET,
    Bundle,
    BundleHint,
    NamespaceBundle,
    OrchestrationSnapshot,
    SessionBundle,
    SessionHeader,
    TurnRecordEntry,
    check_namespace_bundle,
    check_session_bundle,
    dump_bundle,
    load_bundle,
)
from statecore.operations._change_records import record, session_event
from statecore.operations._inspection import inspect_session
from statecore.operations._shares import invalidate_owner, is_share_entry
from statecore.operations._turn_record import compact_record
from statecore.store._base import StateStore, StoreTransaction
from statecore.store._retry import run_transaction

#: Messages read per query while exporting (keeps each result set bounded).
EXPORT_PAGE = 1000
_SESSION_PAGE = 500


async def _all_messages(
    tx: StoreTransaction, ref: SessionRef, through_seq: int | None = None
) -> list[StoredMessage]:
    messages: list[StoredMessage] = []
    while True:
        page = await tx.conversation.messages(
            ref, from_seq=len(messages) + 1, to_seq=through_seq, limit=EXPORT_PAGE
        )
        messages.extend(page)
        if len(page) < EXPORT_PAGE:
            return messages


async def _bundle_hints(tx: StoreTransaction, ref: SessionRef) -> list[BundleHint]:
    return [
        BundleHint(text=h.text, created_at=h.created_at) for h in await tx.conversation.hints(ref)
    ]


async def _export(tx: StoreTransaction, ref: SessionRef) -> SessionBundle:
    info = await tx.sessions.get(ref)
    if info is None:
        raise SessionNotFoundError(f"session {ref} does not exist; nothing to export")
    flows = []
    for flow_id in await tx.flow.flows(ref):
        flows.extend(await tx.flow.history(ref, flow_id))
    orchestration = await tx.orchestration.get(ref)
    return SessionBundle(
        exported_at=tx.now,
        ref=ref,
        session=SessionHeader(
            system_prompt=info.system_prompt,
            window_start_seq=info.window_start_seq,
            ttl_seconds=info.ttl_seconds,
        ),
        messages=await _all_messages(tx, ref),
        hints=await _bundle_hints(tx, ref),
        summary=await tx.conversation.summary(ref),
        kv=sorted(await tx.kv.entries(ref.kv_scope), key=lambda e: (e.bucket, e.key)),
        turns=[
            TurnRecordEntry(turn_id=turn_id, record=record)
            for turn_id, record in await tx.turns.records(ref)
        ],
        state=await tx.state.get(ref.namespace, ref.session_id, ref.agent_id),
        flows=flows,
        orchestration=(
            OrchestrationSnapshot.model_validate(
                orchestration.model_dump(exclude={"last_accessed", "ttl_seconds"})
            )
            if orchestration is not None
            else None
        ),
    )


async def export_session(store: StateStore, ref: SessionRef) -> SessionBundle:
    """Everything the session owns, as of one moment. SessionNotFoundError if it is absent."""
    return await run_transaction(store, lambda tx: _export(tx, ref), read_only=True)


async def export_namespace(
    store: StateStore,
    namespace: str,
    *,
    on_session: Callable[[int, int], None] | None = None,
) -> NamespaceBundle:
    """Every session of the namespace plus its shared KV and other scoped states, read in
    one transaction so the bundle is one consistent moment. ``on_session(done, total)`` is
    called after each session is read (for progress displays)."""
    validate_identifier(namespace, "namespace")

    async def work(tx: StoreTransaction) -> NamespaceBundle:
        refs: list[SessionRef] = []
        while True:
            page = await tx.sessions.list(
                namespace, limit=_SESSION_PAGE, after=refs[-1] if refs else None
            )
            refs.extend(page)
            if len(page) < _SESSION_PAGE:
                break
        sessions = []
        for ref in refs:
            sessions.append(await _export(tx, ref))
            if on_session is not None:
                on_session(len(sessions), len(refs))
        owned = {(ref.session_id, ref.agent_id) for ref in refs}
        states = [s for s in await tx.state.list(namespace) if (s.task_id, s.agent_id) not in owned]
        shared_kv = [
            e
            for e in await tx.kv.entries(KVScope(namespace=namespace, owner=""))
            if not is_share_entry(e)
        ]
        return NamespaceBundle(
            exported_at=tx.now,
            namespace=namespace,
            sessions=sessions,
            kv=sorted(shared_kv, key=lambda e: (e.bucket, e.key)),
            states=sorted(states, key=lambda s: (s.task_id, s.agent_id)),
        )

    return await run_transaction(store, work, read_only=True)


async def _is_occupied(tx: StoreTransaction, ref: SessionRef) -> list[str]:
    """Names of the stores that hold data for ``ref``."""
    return [r.name for r in await inspect_session(tx, ref) if r.exists]


async def _restore(tx: StoreTransaction, bundle: SessionBundle, target: SessionRef) -> None:
    header = bundle.session
    await tx.sessions.ensure(target, ttl_seconds=header.ttl_seconds)
    await tx.conversation.restore(
        target,
        bundle.messages,
        # Placeholder ids: the store numbers restored hints itself.
        hints=[
            Hint(id=number, text=h.text, created_at=h.created_at)
            for number, h in enumerate(bundle.hints, start=1)
        ],
        summary=bundle.summary,
        system_prompt=header.system_prompt,
        window_start_seq=header.window_start_seq,
    )
    kv, records = _split_turn_records(bundle)
    if kv:
        await tx.kv.restore(target.kv_scope, kv)
    if records:
        await tx.turns.restore(target, records)
    if bundle.state is not None:
        moved = bundle.state.model_copy(
            update={
                "namespace": target.namespace,
                "task_id": target.session_id,
                "agent_id": target.agent_id,
            }
        )
        await tx.state.restore([moved])
    if bundle.flows:
        await tx.flow.restore(target, bundle.flows)
    if bundle.orchestration is not None:
        state = OrchestrationState(
            **bundle.orchestration.model_dump(),
            last_accessed=tx.now,
            ttl_seconds=header.ttl_seconds,
        )
        await tx.orchestration.restore(target, state)


def _split_turn_records(bundle: SessionBundle) -> tuple[list[KVEntry], list[tuple[str, Any]]]:
    """The bundle's KV entries for the KV store, and its turn records for theirs: schema 1
    bundles carry turn records as JSON entries of the ``turn`` bucket, in the object layout,
    which is stored as the array records are written in now. A turn id in both keeps the
    ``turns`` section's record."""
    kv: list[KVEntry] = []
    records: list[tuple[str, Any]] = []
    for entry in bundle.kv:
        if entry.bucket == TURN_RECORD_BUCKET and entry.kind == "json":
            records.append((entry.key, compact_record(entry.value)))
        else:
            kv.append(entry)
    records.extend((t.turn_id, t.record) for t in bundle.turns)
    return kv, records


async def _restore_checked(tx: StoreTransaction, bundle: SessionBundle, target: SessionRef) -> None:
    """``_restore``, reporting content the store refuses as a bad bundle. Raising out of the
    transaction rolls back everything restored before the refusal."""
    try:
        await _restore(tx, bundle, target)
    except BundleError:
        raise
    except InvalidInputError as exc:
        raise BundleError(
            f"the store refused the bundle's content for {target}: {exc.message}"
        ) from exc


async def _clear_target(tx: StoreTransaction, target: SessionRef) -> None:
    await tx.sessions.delete(target)
    await invalidate_owner(tx, target)
    # The scoped state can exist without a session header, and the contract promises
    # delete()'s cascade only for sessions that exist.
    await tx.state.delete(target.namespace, target.session_id, target.agent_id)


async def import_session(
    store: StateStore,
    bundle: SessionBundle,
    *,
    target: SessionRef | None = None,
    replace: bool = False,
) -> StateOperationResult:
    """Restore a session bundle into ``target`` (default: the bundle's own ref).

    A target that already holds data raises AlreadyExistsError unless ``replace=True``, which
    deletes the target's state first (listed in ``cleared``). Everything happens in one
    transaction; on any error the target is left as it was."""
    check_session_bundle(bundle)
    target = target or bundle.ref

    async def work(tx: StoreTransaction) -> tuple[list[str], list[Any]]:
        occupied = await _is_occupied(tx, target)
        if occupied and not replace:
            raise AlreadyExistsError(
                f"session {target} already holds {occupied}; import with replace=True to "
                "overwrite it, or choose another target",
                stores=occupied,
            )
        if occupied:
            await _clear_target(tx, target)
        await _restore_checked(tx, bundle, target)
        reports = await inspect_session(tx, target)
        await record(tx, target.namespace, [session_event("import", target, replaced=occupied)])
        return occupied, reports

    occupied, reports = await run_transaction(store, work)
    return StateOperationResult(
        operation="import",
        session_id=target.session_id,
        namespace=target.namespace,
        stores=reports,
        cleared=occupied,
    )


async def import_namespace(
    store: StateStore,
    bundle: NamespaceBundle,
    *,
    namespace: str | None = None,
    replace: bool = False,
) -> StateOperationResult:
    """Restore a namespace bundle into ``namespace`` (default: the bundle's own), in one
    transaction. A namespace that already holds data raises AlreadyExistsError unless
    ``replace=True``, which deletes the whole namespace first."""
    check_namespace_bundle(bundle)
    target_ns = validate_identifier(namespace or bundle.namespace, "namespace")

    async def work(tx: StoreTransaction) -> bool:
        existed = target_ns in await tx.sessions.namespaces()
        if existed and not replace:
            raise AlreadyExistsError(
                f"namespace {target_ns!r} already holds data; import with replace=True to "
                "overwrite it, or choose another namespace"
            )
        if existed:
            await tx.sessions.delete_namespace(target_ns)
        for session in bundle.sessions:
            target = SessionRef(
                namespace=target_ns,
                agent_id=session.ref.agent_id,
                session_id=session.ref.session_id,
            )
            await _restore_checked(tx, session, target)
        kv = [e for e in bundle.kv if not is_share_entry(e)]
        if kv:
            await tx.kv.restore(KVScope(namespace=target_ns, owner=""), kv)
        if bundle.states:
            await tx.state.restore(
                [s.model_copy(update={"namespace": target_ns}) for s in bundle.states]
            )
        await record(
            tx,
            target_ns,
            [NewEvent.of("import", None, sessions=len(bundle.sessions), replaced=existed)],
        )
        return existed

    existed = await run_transaction(store, work)
    result = StateOperationResult(operation="import", namespace=target_ns)
    if existed:
        result.cleared = ["namespace"]
    return result


async def fork_session(
    store: StateStore, source: SessionRef, flow_id: str, version: int, target: SessionRef
) -> SessionInfo:
    """Start ``target`` from checkpoint ``version`` of ``flow_id`` in ``source`` (time travel).

    The new session gets the source's log up to the checkpoint's ``conversation_seq``, its
    system prompt, TTL and hints, and that flow's history up to ``version``. The summary and
    window start are kept only when they lie within the copied log; otherwise the window
    starts at seq 1 so no message is lost from view. KV, scoped state and orchestration are
    not versioned and are not copied. AlreadyExistsError if ``target`` holds data."""
    if target == source:
        raise AlreadyExistsError("a fork needs a target session other than its source")

    async def work(tx: StoreTransaction) -> SessionInfo:
        info = await tx.sessions.get(source)
        if info is None:
            raise SessionNotFoundError(f"session {source} does not exist; nothing to fork")
        checkpoint = await tx.flow.load(source, flow_id, version)
        occupied = await _is_occupied(tx, target)
        if occupied:
            raise AlreadyExistsError(
                f"fork target {target} already holds {occupied}; reset it or pick another id"
            )
        cut = min(checkpoint.conversation_seq, info.last_seq)
        messages = await _all_messages(tx, source, through_seq=cut) if cut > 0 else []
        summary = await tx.conversation.summary(source)
        if summary is not None and summary.through_seq > cut:
            # The summary speaks of messages after the fork point: drop it, show the whole log.
            summary, window_start = None, 1
        elif info.window_start_seq <= cut + 1:
            window_start = info.window_start_seq
        elif summary is not None:
            window_start = summary.through_seq + 1
        else:
            window_start = 1
        history = [c for c in await tx.flow.history(source, flow_id) if c.version <= version]
        fork = SessionBundle(
            exported_at=tx.now,
            ref=target,
            session=SessionHeader(
                system_prompt=info.system_prompt,
                window_start_seq=window_start,
                ttl_seconds=info.ttl_seconds,
            ),
            messages=messages,
            hints=await _bundle_hints(tx, source),
            summary=summary,
            flows=history,
        )
        check_session_bundle(fork)
        await _restore(tx, fork, target)
        return await tx.sessions.ensure(target)

    return await run_transaction(store, work)


__all__ = [
    "BUNDLE_SCHEMA_VERSION",
    "NAMESPACE_FORMAT",
    "SESSION_FORMAT",
    "SUPPORTED_SCHEMA_VERSIONS",
    "Bundle",
    "BundleHint",
    "NamespaceBundle",
    "OrchestrationSnapshot",
    "SessionBundle",
    "SessionHeader",
    "TurnRecordEntry",
    "dump_bundle",
    "export_namespace",
    "export_session",
    "fork_session",
    "import_namespace",
    "import_session",
    "load_bundle",
]
