"""Conformance: session headers, TTL expiry, sweeping and the delete cascade."""

from __future__ import annotations

from datetime import timedelta

import pytest

from statecore.core._errors import InvalidInputError, SessionNotFoundError
from statecore.core._limits import DEFAULT_SESSION_TTL_SECONDS
from statecore.core._models import KVScope, Message, SessionRef
from statecore.store import StateStore
from statecore.store._base import iter_sessions
from tests.store.conftest import FakeClock
from tests.store.helpers import ensure, snapshot, user


async def test_ensure_creates_then_touches(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    created_at = clock()
    async with store.transaction() as tx:
        assert await tx.sessions.get(ref) is None
        info = await tx.sessions.ensure(ref)
    assert info.ref == ref and info.created_at == info.last_accessed == created_at
    assert info.ttl_seconds == DEFAULT_SESSION_TTL_SECONDS
    assert (info.last_seq, info.message_count, info.token_total, info.window_start_seq) == (
        0, 0, 0, 1
    )  # fmt: skip

    later = clock.advance(60)
    async with store.transaction() as tx:
        again = await tx.sessions.ensure(ref)
        assert await tx.sessions.get(ref) == again
    assert again.created_at == created_at and again.last_accessed == later


async def test_ensure_ttl_sets_it_and_omitting_it_keeps_it(
    store: StateStore, make_ref, ref: SessionRef
) -> None:
    async with store.transaction() as tx:
        assert (await tx.sessions.ensure(ref, ttl_seconds=120)).ttl_seconds == 120
        assert (await tx.sessions.ensure(ref)).ttl_seconds == 120
        assert (await tx.sessions.ensure(ref, ttl_seconds=30)).ttl_seconds == 30
        assert (await tx.sessions.ensure(make_ref("other"))).ttl_seconds == (
            DEFAULT_SESSION_TTL_SECONDS
        )


async def test_touch_moves_last_accessed(
    store: StateStore, make_ref, ref: SessionRef, clock: FakeClock
) -> None:
    await ensure(store, ref)
    later = clock.advance(90)
    async with store.transaction() as tx:
        await tx.sessions.touch(ref)
        info = await tx.sessions.get(ref)
    assert info is not None and info.last_accessed == later
    with pytest.raises(SessionNotFoundError):
        async with store.transaction() as tx:
            await tx.sessions.touch(make_ref("missing"))
    async with store.transaction() as tx:
        assert await tx.sessions.get(make_ref("missing")) is None


async def test_list_orders_filters_and_paginates(store: StateStore, make_ref, ns: str) -> None:
    refs = [make_ref(s, agent_id=a) for a in ("bob", "alice") for s in ("s2", "s1", "S3")]
    await ensure(store, *refs, make_ref("s1", namespace=ns + "other"))
    ordered = sorted(refs, key=lambda r: (r.agent_id, r.session_id))
    async with store.transaction() as tx:
        sessions = tx.sessions
        assert await sessions.list(ns) == ordered
        assert await sessions.list(ns, agent_id="bob") == ordered[3:]
        first = await sessions.list(ns, limit=4)
        rest = await sessions.list(ns, limit=4, after=first[-1])
        assert await sessions.list(ns, agent_id="alice", after=ordered[1]) == ordered[2:3]
        assert await sessions.list(ns, agent_id="nobody") == []
    assert first == ordered[:4] and rest == ordered[4:]
    with pytest.raises(InvalidInputError):
        async with store.transaction() as tx:
            await tx.sessions.list(ns, after=make_ref("s1", namespace=ns + "other"))


async def test_expired_uses_last_access_plus_ttl(
    store: StateStore, make_ref, ns: str, clock: FakeClock
) -> None:
    short, long_, touched = make_ref("short"), make_ref("long"), make_ref("touched")
    start = clock()
    async with store.transaction() as tx:
        await tx.sessions.ensure(short, ttl_seconds=60)
        await tx.sessions.ensure(long_, ttl_seconds=3600)
        await tx.sessions.ensure(touched, ttl_seconds=60)
    clock.advance(50)
    async with store.transaction() as tx:
        await tx.sessions.touch(touched)

    async def expired_here(at) -> set[str]:
        async with store.transaction() as tx:
            refs = await tx.sessions.expired(at, limit=1000)
        return {r.session_id for r in refs if r.namespace == ns}

    assert await expired_here(start + timedelta(seconds=59)) == set()
    assert await expired_here(start + timedelta(seconds=61)) == {"short"}
    assert await expired_here(start + timedelta(seconds=111)) == {"short", "touched"}
    # A SQL store may sweep a session up to a 64th of its TTL (a minute at most) late, never
    # early (statecore/store/sql/_session_expiry.py): "long" is due at 3,600 s, by 3,656.25 s.
    assert await expired_here(start + timedelta(seconds=3599)) == {"short", "touched"}
    assert await expired_here(start + timedelta(seconds=3657)) == {"short", "touched", "long"}


async def test_expired_respects_its_limit(store: StateStore, make_ref, clock: FakeClock) -> None:
    await ensure(store, *(make_ref(f"s{n}") for n in range(3)), ttl_seconds=1)
    async with store.transaction() as tx:
        assert len(await tx.sessions.expired(clock() + timedelta(days=1), limit=2)) == 2


async def test_sweep_deletes_expired_sessions_and_keys(
    store: StateStore, make_ref, ns: str, clock: FakeClock
) -> None:
    idle, busy = make_ref("idle"), make_ref("busy")
    await ensure(store, idle, busy, ttl_seconds=60)
    async with store.transaction() as tx:
        await tx.conversation.append(idle, "t", [user("hello")])
        await tx.kv.put(idle.kv_scope, "b", "k", 1)
        await tx.kv.put(busy.kv_scope, "cache", "tmp", 1, ttl_seconds=30)
        await tx.kv.put(busy.kv_scope, "b", "keep", 1)
    now = clock.advance(45)
    async with store.transaction() as tx:
        await tx.sessions.touch(busy)
    now = clock.advance(30)  # idle: 75 s since last access; busy: 30 s

    # The sweep a maintenance job runs: expired sessions, then expired keys.
    async with store.transaction() as tx:
        doomed = [r for r in await tx.sessions.expired(now) if r.namespace == ns]
        for expired_ref in doomed:
            assert await tx.sessions.delete(expired_ref) is True
        assert await tx.kv.sweep_expired(now) >= 1
    assert doomed == [idle]
    async with store.transaction() as tx:
        assert await tx.sessions.get(idle) is None
        assert await tx.kv.entries(idle.kv_scope) == []
        assert await tx.sessions.get(busy) is not None
        assert [e.key for e in await tx.kv.entries(busy.kv_scope)] == ["keep"]


async def _populate(store: StateStore, ref: SessionRef) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(ref)
        await tx.conversation.append(ref, "t1", [user(f"hello from {ref}")])
        await tx.conversation.add_hint(ref, "a hint")
        await tx.conversation.set_summary(ref, "a summary", 1)
        await tx.flow.save(ref, "plan", "start", {"who": str(ref)})
        await tx.orchestration.add_used_tool(ref, "search")
        await tx.kv.put(ref.kv_scope, "prefs", "theme", "dark")
        await tx.kv.put(ref.kv_scope, "tool.search", "cache", {"q": 1})
        await tx.state.create(ref.namespace, ref.session_id, ref.agent_id, {"who": str(ref)})


async def test_delete_cascades_to_exactly_what_the_session_owns(
    store: StateStore, make_ref, ref: SessionRef, ns: str
) -> None:
    sibling = make_ref("s2")
    other_agent = make_ref(ref.session_id, agent_id="agent-b")
    other_ns = make_ref(ref.session_id, namespace=ns + "x")
    bystanders = [sibling, other_agent, other_ns]
    for r in [ref, *bystanders]:
        await _populate(store, r)
    async with store.transaction() as tx:
        await tx.kv.put(KVScope(namespace=ns), "shared", "k", "namespace-wide")
        # Scoped state of the same task by another agent is not this session's.
        await tx.state.create(ns, ref.session_id, "agent-c", {"other": True})
    before = await snapshot(store, ns, bystanders)
    before_other_ns = await snapshot(store, ns + "x", [other_ns])

    async with store.transaction() as tx:
        assert await tx.sessions.delete(ref) is True
    async with store.transaction() as tx:
        assert await tx.sessions.get(ref) is None
        assert await tx.kv.entries(ref.kv_scope) == []
        assert await tx.state.get(ns, ref.session_id, ref.agent_id) is None
        assert await tx.sessions.delete(ref) is False

    after = await snapshot(store, ns, bystanders)
    assert after.pop("sessions") == [r for r in before.pop("sessions") if r != ref.model_dump()]
    assert after.pop("states") == [
        s for s in before.pop("states") if (s["task_id"], s["agent_id"]) != ("s1", "agent")
    ]
    assert after == before
    assert await snapshot(store, ns + "x", [other_ns]) == before_other_ns

    # A new session under the same id starts empty.
    await ensure(store, ref)
    async with store.transaction() as tx:
        assert await tx.conversation.messages(ref) == []
        assert await tx.flow.count(ref) == 0
        assert await tx.orchestration.get(ref) is None


async def test_delete_namespace_and_namespaces(store: StateStore, make_ref, ns: str) -> None:
    kv_only, state_only, gone = ns + "kv", ns + "state", ns + "gone"
    await _populate(store, make_ref("a"))
    await _populate(store, make_ref("b"))
    await _populate(store, make_ref("a", namespace=gone))
    async with store.transaction() as tx:
        await tx.kv.put(KVScope(namespace=ns), "shared", "k", 1)
        await tx.kv.put(KVScope(namespace=kv_only), "shared", "k", 1)
        await tx.state.create(state_only, "task", "agent", {})
        assert {ns, kv_only, state_only, gone} <= set(await tx.sessions.namespaces())
    keep = await snapshot(store, gone, [make_ref("a", namespace=gone)])

    async with store.transaction() as tx:
        assert await tx.sessions.delete_namespace(ns) == 2
        assert await tx.sessions.delete_namespace(ns) == 0
    async with store.transaction() as tx:
        assert await tx.sessions.list(ns) == []
        assert await tx.kv.entries(KVScope(namespace=ns)) == []
        assert await tx.kv.entries(make_ref("a").kv_scope) == []
        assert await tx.state.list(ns) == []
        remaining = set(await tx.sessions.namespaces())
    assert ns not in remaining and {kv_only, state_only, gone} <= remaining
    assert await snapshot(store, gone, [make_ref("a", namespace=gone)]) == keep

    async with store.transaction() as tx:
        assert await tx.kv.clear(KVScope(namespace=kv_only)) == 1
        assert await tx.state.delete(state_only, "task", "agent") is True
    async with store.transaction() as tx:
        remaining = set(await tx.sessions.namespaces())
    assert kv_only not in remaining and state_only not in remaining


async def test_iter_sessions_walks_every_page(store: StateStore, make_ref, ns: str) -> None:
    # 501 sessions: one more than iter_sessions' page, so the second page is exercised.
    refs = [make_ref(f"s{n:04d}") for n in range(501)]
    await ensure(store, *refs)
    seen = [r async for r in iter_sessions(store, ns)]
    assert seen == refs


async def test_a_touch_counts_within_its_own_transaction_and_after_it(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    """Touching a session moves its expiry for the rest of the transaction (an expiry sweep
    in it no longer finds the session) and for every later one, log written or not."""
    async with store.transaction() as tx:
        await tx.sessions.ensure(ref, ttl_seconds=60)
    later = clock.advance(120)
    async with store.transaction() as tx:
        assert ref in await tx.sessions.expired(later)
        await tx.sessions.ensure(ref)
        assert ref not in await tx.sessions.expired(later)
    async with store.transaction() as tx:
        assert ref not in await tx.sessions.expired(later)
        info = await tx.sessions.get(ref)
        assert info is not None and info.last_accessed == later
    clock.advance(30)
    async with store.transaction() as tx:
        await tx.sessions.ensure(ref)
        await tx.conversation.append(ref, "t1", [Message(role="user", content="hi")])
    async with store.transaction() as tx:
        info = await tx.sessions.get(ref)
        assert info is not None and info.last_accessed == clock() and info.last_seq == 1
