"""Every door records what it commits: one event per kind of change, naming the right ids,
whichever public entry point made it, and nothing for a refused change (every backend).

Each row prepares a session (its events are not counted), then drives one entry point and
compares the events that entry point's commit added with the row's expectation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from statecore.contract._shares import ShareGrantOp
from statecore.core._errors import (
    RevisionConflictError,
    ShareTokenUnknownError,
    StatecoreError,
    UnknownStoreError,
    VersionConflictError,
)
from statecore.core._models import KVScope, Message, SessionRef
from statecore.core._tokens import TokenCounter
from statecore.operations._bundles import (
    export_namespace,
    export_session,
    fork_session,
    import_namespace,
    import_session,
)
from statecore.operations._compaction import CompactionRequest
from statecore.operations._control_plane import compact, reset, sweep
from statecore.operations._shares import create_grant, new_token, revoke
from statecore.store import StateStore, StoreTransaction, run_transaction
from statecore.store._feed import read_events
from tests.store.conftest import FakeClock


@dataclass
class Door:
    store: StateStore
    ref: SessionRef
    clock: FakeClock
    counter: TokenCounter
    facts: dict[str, Any] = field(default_factory=dict)

    async def tx(self, work: Callable[[StoreTransaction], Awaitable[Any]]) -> Any:
        return await run_transaction(self.store, work)


Step = Callable[[Door], Awaitable[Any]]
#: (kind, who, detail subset); who is "ref" (the row's session), "ns" (the namespace) or
#: "fork" (the fork's target).
Expect = tuple[str, str, dict[str, Any]]


@dataclass
class Row:
    name: str
    act: Step
    expect: list[Expect]
    prepare: Step | None = None
    refused: type[Exception] | None = None


def _msgs(*texts: str) -> list[Message]:
    return [Message(role="user", content=t) for t in texts]


async def _with_log(d: Door) -> None:
    async def work(tx: StoreTransaction) -> None:
        await tx.sessions.ensure(d.ref)
        await tx.conversation.append(d.ref, "t0", _msgs("one", "two", "three"))

    await d.tx(work)


async def _with_session(d: Door) -> None:
    await d.tx(lambda tx: tx.sessions.ensure(d.ref))


async def _with_state(d: Door) -> None:
    async def work(tx: StoreTransaction) -> None:
        await tx.sessions.ensure(d.ref)
        await tx.state.create(d.ref.namespace, d.ref.session_id, d.ref.agent_id, {"v": 1})

    await d.tx(work)


async def _with_kv(d: Door) -> None:
    async def work(tx: StoreTransaction) -> None:
        await tx.sessions.ensure(d.ref)
        await tx.kv.put(d.ref.kv_scope, "notes", "k", "v")

    await d.tx(work)


async def _with_grant(d: Door) -> None:
    await _with_state(d)
    ticket = new_token()
    grant = await d.tx(
        lambda tx: create_grant(tx, d.ref, ShareGrantOp(token=ticket.token, kind="state"))
    )
    d.facts["share_id"] = grant.share_id


async def _with_hint(d: Door) -> None:
    async def work(tx: StoreTransaction) -> None:
        await tx.sessions.ensure(d.ref)
        d.facts["hint"] = (await tx.conversation.add_hint(d.ref, "be brief")).id

    await d.tx(work)


def _in_tx(work: Callable[[Door, StoreTransaction], Awaitable[Any]]) -> Step:
    async def step(d: Door) -> Any:
        return await d.tx(lambda tx: work(d, tx))

    return step


async def _two_kv_writes_and_state(d: Door, tx: StoreTransaction) -> None:
    await tx.kv.put(d.ref.kv_scope, "notes", "a", 1)
    await tx.kv.put(d.ref.kv_scope, "notes", "b", 2)
    await tx.state.update(d.ref.namespace, d.ref.session_id, d.ref.agent_id, {"v": 2})


async def _writes_then_raises(d: Door) -> None:
    class Boom(Exception):
        pass

    try:
        async with d.store.transaction() as tx:
            await tx.kv.put(d.ref.kv_scope, "notes", "x", 1)
            raise Boom
    except Boom:
        raise StatecoreError("rolled back") from None


async def _agents_session(d: Door, method: str, *args: Any) -> Any:
    from statecore.integrations.openai_agents import StatecoreSession

    session = StatecoreSession(
        d.ref.session_id, store=d.store, agent_id=d.ref.agent_id, namespace=d.ref.namespace
    )
    return await getattr(session, method)(*args)


async def _import_over(d: Door) -> None:
    bundle = await export_session(d.store, d.ref)
    await import_session(d.store, bundle, replace=True)


async def _import_namespace_over(d: Door) -> None:
    bundle = await export_namespace(d.store, d.ref.namespace)
    await import_namespace(d.store, bundle, replace=True)


async def _with_flow(d: Door) -> None:
    await _with_log(d)
    await d.tx(lambda tx: tx.flow.save(d.ref, "plan", "s1", {"x": 1}))


async def _fork(d: Door) -> None:
    target = d.ref.model_copy(update={"session_id": d.ref.session_id + "-fork"})
    await fork_session(d.store, d.ref, "plan", 1, target)


async def _expire(d: Door) -> None:
    d.clock.advance(days=400)
    await sweep(d.store)


async def _compact(d: Door) -> None:
    await compact(
        d.store, d.ref, CompactionRequest(strategy="recent", max_messages=1), counter=d.counter
    )


ROWS: list[Row] = [
    # --- the store API, one module method per row -------------------------------------------
    Row("ensure creates a session: no content changed", _with_session, []),
    Row(
        "conversation.append",
        _in_tx(lambda d, tx: tx.conversation.append(d.ref, "t1", _msgs("a", "b"))),
        [("messages", "ref", {"count": 2, "first_seq": 4, "last_seq": 5})],
        prepare=_with_log,
    ),
    Row(
        "conversation.retract_last",
        _in_tx(lambda d, tx: tx.conversation.retract_last(d.ref)),
        [("messages", "ref", {"retracted": [3]})],
        prepare=_with_log,
    ),
    Row(
        "conversation.set_system_prompt",
        _in_tx(lambda d, tx: tx.conversation.set_system_prompt(d.ref, "be kind")),
        [("messages", "ref", {"system_prompt_bytes": 7})],
        prepare=_with_session,
    ),
    Row(
        "conversation.add_hint",
        _in_tx(lambda d, tx: tx.conversation.add_hint(d.ref, "short answers")),
        [("hint", "ref", {})],
        prepare=_with_session,
    ),
    Row(
        "conversation.remove_hint",
        _in_tx(lambda d, tx: tx.conversation.remove_hint(d.ref, d.facts["hint"])),
        [("hint", "ref", {})],
        prepare=_with_hint,
    ),
    Row(
        "conversation.set_summary and set_window_start, one transaction",
        _in_tx(
            lambda d, tx: _summary_and_window(d, tx),
        ),
        [("compaction", "ref", {"summary_through_seq": 2, "window_start": 3})],
        prepare=_with_log,
    ),
    Row(
        "conversation.clear",
        _in_tx(lambda d, tx: tx.conversation.clear(d.ref)),
        [("reset", "ref", {"stores": {"conversation": 3}})],
        prepare=_with_log,
    ),
    Row(
        "kv.put in a session's scope",
        _in_tx(lambda d, tx: tx.kv.put(d.ref.kv_scope, "notes", "k", "value")),
        [("kv", "ref", {"count": 1})],
        prepare=_with_session,
    ),
    Row(
        "kv.put in the namespace's scope",
        _in_tx(lambda d, tx: tx.kv.put(KVScope(namespace=d.ref.namespace), "cfg", "k", 1)),
        [("kv", "ns", {"count": 1})],
    ),
    Row(
        "kv.delete",
        _in_tx(lambda d, tx: tx.kv.delete(d.ref.kv_scope, "notes", "k")),
        [("kv", "ref", {"writes": [{"op": "delete", "bucket": "notes", "key": "k"}]})],
        prepare=_with_kv,
    ),
    Row(
        "kv.delete of a missing key changes nothing",
        _in_tx(lambda d, tx: tx.kv.delete(d.ref.kv_scope, "notes", "absent")),
        [],
        prepare=_with_kv,
    ),
    Row(
        "kv.put refused: a stale revision",
        _in_tx(lambda d, tx: tx.kv.put(d.ref.kv_scope, "notes", "k", 2, expected_revision=7)),
        [],
        prepare=_with_kv,
        refused=RevisionConflictError,
    ),
    Row(
        "kv.clear",
        _in_tx(lambda d, tx: tx.kv.clear(d.ref.kv_scope, "notes")),
        [("kv", "ref", {"cleared": 1})],
        prepare=_with_kv,
    ),
    Row(
        "state.create",
        _in_tx(lambda d, tx: tx.state.create(d.ref.namespace, d.ref.session_id, "agent", {})),
        [("state", "ref", {"version": 1})],
    ),
    Row(
        "state.update",
        _in_tx(lambda d, tx: tx.state.update(d.ref.namespace, d.ref.session_id, "agent", {"v": 2})),
        [("state", "ref", {"version": 2})],
        prepare=_with_state,
    ),
    Row(
        "state.update refused: a stale version",
        _in_tx(
            lambda d, tx: tx.state.update(
                d.ref.namespace, d.ref.session_id, "agent", {"v": 2}, expected_version=5
            )
        ),
        [],
        prepare=_with_state,
        refused=VersionConflictError,
    ),
    Row(
        "state.delete",
        _in_tx(lambda d, tx: tx.state.delete(d.ref.namespace, d.ref.session_id, "agent")),
        [("state", "ref", {"deleted": True})],
        prepare=_with_state,
    ),
    Row(
        "flow.save",
        _in_tx(lambda d, tx: tx.flow.save(d.ref, "plan", "draft", {"x": 1})),
        [("flow", "ref", {"checkpoints": [{"flow_id": "plan", "step": "draft"}]})],
        prepare=_with_session,
    ),
    Row(
        "orchestration.set_active_step",
        _in_tx(lambda d, tx: tx.orchestration.set_active_step(d.ref, "review")),
        [("orchestration", "ref", {"step": "review"})],
        prepare=_with_session,
    ),
    Row(
        "orchestration.add_token_usage",
        _in_tx(lambda d, tx: tx.orchestration.add_token_usage(d.ref, 3, 4)),
        [("orchestration", "ref", {"tokens": 7})],
        prepare=_with_session,
    ),
    Row(
        "sessions.delete",
        _in_tx(lambda d, tx: tx.sessions.delete(d.ref)),
        [("reset", "ref", {"deleted": True})],
        prepare=_with_log,
    ),
    Row(
        "several writes in one transaction: one event per kind",
        _in_tx(_two_kv_writes_and_state),
        [("kv", "ref", {"count": 2}), ("state", "ref", {"version": 2})],
        prepare=_with_state,
    ),
    Row(
        "a transaction that raises commits nothing and records nothing",
        _writes_then_raises,
        [],
        prepare=_with_session,
        refused=StatecoreError,
    ),
    # --- the other doors ---------------------------------------------------------------------
    Row(
        "StatecoreSession.add_items on its own",
        lambda d: _agents_session(d, "add_items", [{"role": "user", "content": "hi"}]),
        [("messages", "ref", {"count": 1, "first_seq": 1})],
    ),
    Row(
        "StatecoreSession.pop_item on its own",
        lambda d: _agents_session(d, "pop_item"),
        [("messages", "ref", {"retracted": [3]})],
        prepare=_with_log,
    ),
    Row(
        "StatecoreSession.pop_item of an empty session changes nothing",
        lambda d: _agents_session(d, "pop_item"),
        [],
    ),
    Row(
        "StatecoreSession.clear_session on its own",
        lambda d: _agents_session(d, "clear_session"),
        [("reset", "ref", {"stores": {"conversation": 3}})],
        prepare=_with_log,
    ),
    Row(
        "an operator's share revocation (statecore shares revoke)",
        lambda d: d.tx(lambda tx: revoke(tx, d.ref.namespace, d.facts["share_id"])),
        [("share", "ref", {"granted": [], "wrote": []})],
        prepare=_with_grant,
    ),
    Row(
        "a revocation of an unknown share is refused",
        lambda d: d.tx(lambda tx: revoke(tx, d.ref.namespace, "0" * 24)),
        [],
        prepare=_with_session,
        refused=ShareTokenUnknownError,
    ),
    Row(
        "a reset of a session (operator signal or CLI)",
        lambda d: reset(d.store, d.ref),
        [("reset", "ref", {})],
        prepare=_with_log,
    ),
    Row(
        "a compaction",
        _compact,
        [("compaction", "ref", {"window_start": 3})],
        prepare=_with_log,
    ),
    Row(
        "a namespace's reset",
        lambda d: reset(d.store, None, namespace=d.ref.namespace, all_sessions=True),
        [("reset", "ns", {"all": True})],
        prepare=_with_log,
    ),
    Row(
        "a reset that names an unknown store is refused",
        lambda d: reset(d.store, d.ref, stores=["groceries"]),
        [],
        prepare=_with_log,
        refused=UnknownStoreError,
    ),
    Row("a bundle import over the session", _import_over, [("import", "ref", {})], _with_log),
    Row(
        "a namespace bundle import over the namespace",
        _import_namespace_over,
        [("import", "ns", {"replaced": True})],
        _with_log,
    ),
    Row("a fork (time travel)", _fork, [("import", "fork", {})], _with_flow),
    Row("the TTL sweep", _expire, [("expired", "ref", {})], _with_log),
    Row(
        "a sweep of expired KV keys: their expiry already hid them",
        lambda d: d.tx(lambda tx: tx.kv.sweep_expired(d.clock.advance(days=1))),
        [],
        prepare=_with_session,
    ),
    Row(
        "a retention sweep of the feed itself",
        lambda d: d.tx(lambda tx: tx.events.sweep(keep_last=1, namespace=d.ref.namespace)),
        [],
        prepare=_with_log,
    ),
]


async def _summary_and_window(d: Door, tx: StoreTransaction) -> None:
    await tx.conversation.set_summary(d.ref, "the first two", 2)
    await tx.conversation.set_window_start(d.ref, 3)


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
async def test_every_door_records_one_event_per_committed_change(
    row: Row,
    store: StateStore,
    make_ref: Callable[..., SessionRef],
    clock: FakeClock,
    token_counter: TokenCounter,
) -> None:
    ref = make_ref(session_id="door")
    d = Door(store, ref, clock, token_counter)
    if row.prepare is not None:
        await row.prepare(d)
    async with store.transaction(read_only=True) as tx:
        before = await tx.events.last_seq(ref.namespace)
    clock.advance(seconds=1)  # the act's commit has a time of its own
    if row.refused is not None:
        with pytest.raises(row.refused):
            await row.act(d)
    else:
        await row.act(d)
    events = await read_events(store, ref.namespace, after=before)
    who = {
        "ref": (ref.agent_id, ref.session_id),
        "ns": (None, None),
        "fork": (ref.agent_id, ref.session_id + "-fork"),
    }
    got = [(e.kind, (e.agent_id, e.session_id)) for e in events]
    assert got == [(kind, who[w]) for kind, w, _ in row.expect], row.name
    for event, (_, _, detail) in zip(events, row.expect, strict=True):
        assert {k: event.detail.get(k) for k in detail} == detail, (row.name, event.detail)
    if events:  # numbered after what was there, without gaps
        assert [e.seq for e in events] == list(range(before + 1, before + 1 + len(events)))


async def test_writes_made_concurrently_in_one_transaction_are_each_recorded(
    store: StateStore, ref: SessionRef
) -> None:
    async def work(tx: StoreTransaction) -> None:
        await tx.sessions.ensure(ref)
        if store.dialect == "memory":  # one SQL connection takes one statement at a time
            await asyncio.gather(*(tx.kv.put(ref.kv_scope, "b", f"k{i}", i) for i in range(3)))
        else:
            for i in range(3):
                await tx.kv.put(ref.kv_scope, "b", f"k{i}", i)

    await run_transaction(store, work)
    [event] = await read_events(store, ref.namespace)
    assert (event.kind, event.detail["count"]) == ("kv", 3)
