"""Conformance: KV buckets (KVStore) on every backend."""

from __future__ import annotations

from datetime import timedelta

import pytest

from statecore.core._errors import ContentTooLargeError, RevisionConflictError
from statecore.core._limits import MAX_KV_VALUE_BYTES
from statecore.core._models import KVScope, SessionRef
from statecore.store import StateStore
from tests.store.conftest import FakeClock
from tests.store.helpers import ensure

JSON_VALUES = [
    {"theme": "dark", "nested": {"list": [1, 2.5, None, True, "ü"]}},
    ["a", 1],
    "plain text",
    42,
    3.25,
    True,
    None,
]


@pytest.fixture
def scope(ref: SessionRef) -> KVScope:
    return ref.kv_scope


async def test_put_and_get_json_and_bytes(
    store: StateStore, scope: KVScope, clock: FakeClock
) -> None:
    raw = bytes(range(256))
    async with store.transaction() as tx:
        for n, value in enumerate(JSON_VALUES):
            assert await tx.kv.put(scope, "json", f"k{n}", value) == 1
        assert await tx.kv.put(scope, "blobs", "all-bytes", raw) == 1
    async with store.transaction() as tx:
        for n, value in enumerate(JSON_VALUES):
            entry = await tx.kv.get(scope, "json", f"k{n}")
            assert entry is not None
            assert (entry.kind, entry.value, entry.revision) == ("json", value, 1)
        blob = await tx.kv.get(scope, "blobs", "all-bytes")
        assert await tx.kv.get(scope, "json", "missing") is None
    assert blob is not None
    assert (blob.kind, blob.value, blob.bucket, blob.key) == ("bytes", raw, "blobs", "all-bytes")
    assert blob.created_at == blob.updated_at == clock()
    assert blob.expires_at is None


async def test_each_write_bumps_the_revision(
    store: StateStore, scope: KVScope, clock: FakeClock
) -> None:
    created = clock()
    async with store.transaction() as tx:
        assert await tx.kv.put(scope, "b", "counter", 1) == 1
    clock.advance(5)
    async with store.transaction() as tx:
        assert await tx.kv.put(scope, "b", "counter", 2) == 2
        assert await tx.kv.put(scope, "b", "counter", 3) == 3
    async with store.transaction() as tx:
        entry = await tx.kv.get(scope, "b", "counter")
    assert entry is not None and (entry.value, entry.revision) == (3, 3)
    assert entry.created_at == created and entry.updated_at == clock()


async def test_expected_revision_is_compare_and_set(store: StateStore, scope: KVScope) -> None:
    async with store.transaction() as tx:
        assert await tx.kv.put(scope, "b", "k", "v1", expected_revision=0) == 1
        assert await tx.kv.put(scope, "b", "k", "v2", expected_revision=1) == 2
    for stale in (0, 1, 3):
        with pytest.raises(RevisionConflictError):
            async with store.transaction() as tx:
                await tx.kv.put(scope, "b", "k", "lost update", expected_revision=stale)
    async with store.transaction() as tx:
        entry = await tx.kv.get(scope, "b", "k")
    assert entry is not None and (entry.value, entry.revision) == ("v2", 2)


async def test_delete_with_and_without_expected_revision(store: StateStore, scope: KVScope) -> None:
    async with store.transaction() as tx:
        await tx.kv.put(scope, "b", "k", "v")
        await tx.kv.put(scope, "b", "k", "v")
        await tx.kv.put(scope, "b", "other", "v")
    with pytest.raises(RevisionConflictError):
        async with store.transaction() as tx:
            await tx.kv.delete(scope, "b", "k", expected_revision=1)
    async with store.transaction() as tx:
        assert await tx.kv.get(scope, "b", "k") is not None
        assert await tx.kv.delete(scope, "b", "k", expected_revision=2) is True
        assert await tx.kv.delete(scope, "b", "k") is False
        assert await tx.kv.delete(scope, "b", "other") is True
        # A key written again after a delete is a new key: revision 1.
        assert await tx.kv.put(scope, "b", "k", "again", expected_revision=0) == 1


async def test_ttl_expiry_follows_the_clock(
    store: StateStore, scope: KVScope, clock: FakeClock
) -> None:
    start = clock()
    async with store.transaction() as tx:
        await tx.kv.put(scope, "cache", "short", "soon gone", ttl_seconds=60)
        await tx.kv.put(scope, "cache", "half", "fractional", ttl_seconds=0.5)
        await tx.kv.put(scope, "cache", "forever", "stays")
    async with store.transaction() as tx:
        entry = await tx.kv.get(scope, "cache", "short")
    assert entry is not None and entry.expires_at == start + timedelta(seconds=60)

    clock.advance(59)
    async with store.transaction() as tx:
        assert await tx.kv.get(scope, "cache", "short") is not None
        assert await tx.kv.get(scope, "cache", "half") is None
    clock.advance(2)
    async with store.transaction() as tx:
        kv = tx.kv
        assert await kv.get(scope, "cache", "short") is None
        assert (await kv.list_keys(scope, "cache")).keys == ["forever"]
        assert await kv.count(scope) == 1
        assert [e.key for e in await kv.entries(scope)] == ["forever"]
        # An expired key counts as absent: "must not exist" succeeds and starts at 1.
        assert await kv.put(scope, "cache", "short", "back", expected_revision=0) == 1
        revived = await kv.get(scope, "cache", "short")
    assert revived is not None and revived.expires_at is None and revived.created_at == clock()


async def test_put_without_ttl_clears_an_earlier_ttl(
    store: StateStore, scope: KVScope, clock: FakeClock
) -> None:
    async with store.transaction() as tx:
        await tx.kv.put(scope, "b", "k", 1, ttl_seconds=10)
        await tx.kv.put(scope, "b", "k", 2)
    clock.advance(3600)
    async with store.transaction() as tx:
        entry = await tx.kv.get(scope, "b", "k")
    assert entry is not None and entry.value == 2 and entry.expires_at is None


async def test_expired_bucket_disappears_from_buckets(
    store: StateStore, scope: KVScope, clock: FakeClock
) -> None:
    async with store.transaction() as tx:
        await tx.kv.put(scope, "temp", "k", 1, ttl_seconds=1)
        await tx.kv.put(scope, "keep", "k", 1)
        assert await tx.kv.buckets(scope) == ["keep", "temp"]
    clock.advance(2)
    async with store.transaction() as tx:
        assert await tx.kv.buckets(scope) == ["keep"]


async def test_sweep_deletes_expired_keys_in_every_scope(
    store: StateStore, make_ref, clock: FakeClock
) -> None:
    a, b = make_ref("a").kv_scope, make_ref("b").kv_scope
    shared = KVScope(namespace=a.namespace)
    async with store.transaction() as tx:
        await tx.kv.put(a, "cache", "x", 1, ttl_seconds=10)
        await tx.kv.put(b, "cache", "y", 1, ttl_seconds=10)
        await tx.kv.put(shared, "cache", "z", 1, ttl_seconds=10)
        await tx.kv.put(shared, "cache", "later", 1, ttl_seconds=1000)
        await tx.kv.put(a, "cache", "kept", 1)
    async with store.transaction() as tx:
        # Nothing has expired at "now": sweeping removes nothing of ours.
        await tx.kv.sweep_expired(clock())
        assert await tx.kv.count(a) == 2
    now = clock.advance(11)
    async with store.transaction() as tx:
        # Other tests' keys in a shared database may expire too, hence ">=".
        assert await tx.kv.sweep_expired(now) >= 3
    async with store.transaction() as tx:
        assert [e.key for e in await tx.kv.entries(a)] == ["kept"]
        assert await tx.kv.entries(b) == []
        assert [e.key for e in await tx.kv.entries(shared)] == ["later"]


async def test_list_keys_orders_by_code_point_and_is_case_sensitive(
    store: StateStore, scope: KVScope
) -> None:
    keys = ["b", "a", "B", "A", "a-1", "a_1", "a.1", "a:1", "a=1", "a+1", "a@1", "a1", "Z9"]
    async with store.transaction() as tx:
        for n, key in enumerate(keys):
            await tx.kv.put(scope, "b", key, n)
    async with store.transaction() as tx:
        page = await tx.kv.list_keys(scope, "b", limit=1000)
        # "a" and "A" are two keys, not one (no case-insensitive collation anywhere).
        lower = await tx.kv.get(scope, "b", "a")
        upper = await tx.kv.get(scope, "b", "A")
    assert page.keys == sorted(keys) and page.next_after is None
    assert lower is not None and upper is not None and (lower.value, upper.value) == (1, 3)


async def test_prefix_is_literal(store: StateStore, scope: KVScope) -> None:
    async with store.transaction() as tx:
        for key in ("user_1", "userA1", "user_10", "user-1", "user", "usex_1", "xuser_1"):
            await tx.kv.put(scope, "b", key, True)
    async with store.transaction() as tx:
        # '_' would match any one character in a SQL LIKE pattern; here it is just '_'.
        assert (await tx.kv.list_keys(scope, "b", "user_")).keys == ["user_1", "user_10"]
        assert (await tx.kv.list_keys(scope, "b", "user_1")).keys == ["user_1", "user_10"]
        assert (await tx.kv.list_keys(scope, "b", "user")).keys == [
            "user", "user-1", "userA1", "user_1", "user_10"
        ]  # fmt: skip
        assert (await tx.kv.list_keys(scope, "b", "nope")).keys == []


async def test_athyr_style_prefix_listing(store: StateStore, scope: KVScope) -> None:
    async with store.transaction() as tx:
        for key in ("user:123:theme", "user:123:lang", "user:123:timezone", "user:1234:theme"):
            await tx.kv.put(scope, "user-preferences", key, "x")
    async with store.transaction() as tx:
        page = await tx.kv.list_keys(scope, "user-preferences", "user:123:")
    assert page.keys == ["user:123:lang", "user:123:theme", "user:123:timezone"]


async def test_list_keys_paginates(store: StateStore, scope: KVScope) -> None:
    keys = [f"k{n:03d}" for n in range(7)]
    async with store.transaction() as tx:
        for key in keys:
            await tx.kv.put(scope, "b", key, 0)
        await tx.kv.put(scope, "other-bucket", "k000x", 0)
    pages: list[list[str]] = []
    after = None
    async with store.transaction() as tx:
        while True:
            page = await tx.kv.list_keys(scope, "b", "k", limit=3, after=after)
            pages.append(page.keys)
            if page.next_after is None:
                break
            assert page.next_after == page.keys[-1]
            after = page.next_after
        # Exactly `limit` keys left: that page is the last one.
        exact = await tx.kv.list_keys(scope, "b", limit=7)
        after_last = await tx.kv.list_keys(scope, "b", after="k006")
        between = await tx.kv.list_keys(scope, "b", after="k0025", limit=2)
    assert pages == [keys[0:3], keys[3:6], keys[6:7]]
    assert exact.keys == keys and exact.next_after is None
    assert after_last.keys == [] and after_last.next_after is None
    assert between.keys == ["k003", "k004"] and between.next_after == "k004"


async def test_buckets_count_entries_and_clear(store: StateStore, scope: KVScope) -> None:
    async with store.transaction() as tx:
        await tx.kv.put(scope, "tool.search", "a", 1)
        await tx.kv.put(scope, "tool.search", "b", 2)
        await tx.kv.put(scope, "tool.calc", "a", 3)
        await tx.kv.put(scope, "prefs", "theme", "dark")
    async with store.transaction() as tx:
        kv = tx.kv
        assert await kv.buckets(scope) == ["prefs", "tool.calc", "tool.search"]
        assert await kv.count(scope) == 4
        assert await kv.count(scope, "tool.") == 3
        assert await kv.count(scope, "tool.s") == 2
        entries = await kv.entries(scope)
        assert [(e.bucket, e.key) for e in entries] == [
            ("prefs", "theme"), ("tool.calc", "a"), ("tool.search", "a"), ("tool.search", "b")
        ]  # fmt: skip
        assert await kv.clear(scope, "tool.") == 3
    async with store.transaction() as tx:
        assert await tx.kv.buckets(scope) == ["prefs"]
        assert await tx.kv.clear(scope) == 1
        assert await tx.kv.clear(scope) == 0
        assert await tx.kv.count(scope) == 0


async def test_scopes_are_isolated(store: StateStore, make_ref, ref: SessionRef) -> None:
    scopes = [
        ref.kv_scope,
        make_ref("s2").kv_scope,
        make_ref("s1", agent_id="other-agent").kv_scope,
        KVScope(namespace=ref.namespace),
        KVScope(namespace=ref.namespace + "x", owner=ref.owner),
    ]
    async with store.transaction() as tx:
        for n, scope in enumerate(scopes):
            await tx.kv.put(scope, "b", "same-key", n)
    async with store.transaction() as tx:
        for n, scope in enumerate(scopes):
            entry = await tx.kv.get(scope, "b", "same-key")
            assert entry is not None and entry.value == n and entry.revision == 1
        assert await tx.kv.clear(scopes[0]) == 1
    async with store.transaction() as tx:
        assert await tx.kv.get(scopes[0], "b", "same-key") is None
        for scope in scopes[1:]:
            assert await tx.kv.count(scope) == 1


async def test_restore_keeps_revisions_and_timestamps(
    store: StateStore, make_ref, scope: KVScope, clock: FakeClock
) -> None:
    async with store.transaction() as tx:
        await tx.kv.put(scope, "b", "json", {"a": 1})
        await tx.kv.put(scope, "b", "json", {"a": 2})
        await tx.kv.put(scope, "b", "bytes", b"\x00\xff")
        await tx.kv.put(scope, "c", "ttl", "x", ttl_seconds=3600)
        exported = await tx.kv.entries(scope)
    target = make_ref("restored").kv_scope
    clock.advance(60)
    async with store.transaction() as tx:
        await tx.kv.restore(target, exported)
    async with store.transaction() as tx:
        assert await tx.kv.entries(target) == exported
        assert await tx.kv.put(target, "b", "json", 3, expected_revision=2) == 3


async def test_value_size_limit(store: StateStore, scope: KVScope) -> None:
    fits = "x" * (MAX_KV_VALUE_BYTES - 2)  # a JSON string: two quotes plus the text
    async with store.transaction() as tx:
        await tx.kv.put(scope, "big", "json", fits)
        await tx.kv.put(scope, "big", "bytes", b"\x01" * MAX_KV_VALUE_BYTES)
    for value in ("x" * (MAX_KV_VALUE_BYTES - 1), b"\x01" * (MAX_KV_VALUE_BYTES + 1)):
        with pytest.raises(ContentTooLargeError):
            async with store.transaction() as tx:
                await tx.kv.put(scope, "big", "json", value)
    async with store.transaction() as tx:
        entry = await tx.kv.get(scope, "big", "json")
        blob = await tx.kv.get(scope, "big", "bytes")
    assert entry is not None and entry.value == fits and entry.revision == 1
    assert blob is not None and len(blob.value) == MAX_KV_VALUE_BYTES


async def test_kv_needs_no_session_header(store: StateStore, ref: SessionRef) -> None:
    # Namespace-wide scopes have no session at all; session scopes work the same way.
    async with store.transaction() as tx:
        await tx.kv.put(KVScope(namespace=ref.namespace), "b", "k", 1)
        await tx.kv.put(ref.kv_scope, "b", "k", 2)
        assert await tx.sessions.get(ref) is None
    await ensure(store, ref)
    async with store.transaction() as tx:
        entry = await tx.kv.get(ref.kv_scope, "b", "k")
    assert entry is not None and entry.value == 2
