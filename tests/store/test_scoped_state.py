"""Conformance: Agentex scoped state (ScopedStateStore) on every backend."""

from __future__ import annotations

import pytest

from statecore.core._errors import (
    AlreadyExistsError,
    NotFoundError,
    StateTooLargeError,
    VersionConflictError,
)
from statecore.core._limits import MAX_STATE_BYTES
from statecore.store import StateStore
from tests.store.conftest import FakeClock

#: len('{"blob":""}'): the JSON around the payload of ``_document``.
_ENVELOPE = 11


def _document(size: int, char: str = "x") -> dict[str, str]:
    """A document whose compact UTF-8 JSON form is exactly ``size`` bytes."""
    width = len(char.encode("utf-8"))
    payload, rest = divmod(size - _ENVELOPE, width)
    assert rest == 0, "size must leave room for whole characters"
    return {"blob": char * payload}


async def test_create_get_update_delete(store: StateStore, ns: str, clock: FakeClock) -> None:
    created_at = clock()
    async with store.transaction() as tx:
        state = await tx.state.create(ns, "task_123", "analyst-agent", {"progress": 75})
    assert (state.version, state.state, state.namespace) == (1, {"progress": 75}, ns)
    assert (state.task_id, state.agent_id) == ("task_123", "analyst-agent")
    assert state.created_at == state.updated_at == created_at

    clock.advance(10)
    async with store.transaction() as tx:
        updated = await tx.state.update(ns, "task_123", "analyst-agent", {"progress": 100})
        assert await tx.state.get(ns, "task_123", "analyst-agent") == updated
    assert (updated.version, updated.state) == (2, {"progress": 100})
    assert updated.created_at == created_at and updated.updated_at == clock()

    async with store.transaction() as tx:
        assert await tx.state.delete(ns, "task_123", "analyst-agent") is True
        assert await tx.state.delete(ns, "task_123", "analyst-agent") is False
        assert await tx.state.get(ns, "task_123", "analyst-agent") is None


async def test_create_twice_conflicts(store: StateStore, ns: str) -> None:
    async with store.transaction() as tx:
        await tx.state.create(ns, "t", "a", {"first": True})
    with pytest.raises(AlreadyExistsError):
        async with store.transaction() as tx:
            await tx.state.create(ns, "t", "a", {"second": True})
    async with store.transaction() as tx:
        state = await tx.state.get(ns, "t", "a")
    assert state is not None and (state.state, state.version) == ({"first": True}, 1)


async def test_update_with_expected_version(store: StateStore, ns: str) -> None:
    async with store.transaction() as tx:
        await tx.state.create(ns, "t", "a", {"n": 0})
        await tx.state.update(ns, "t", "a", {"n": 1}, expected_version=1)
    with pytest.raises(VersionConflictError):
        async with store.transaction() as tx:
            await tx.state.update(ns, "t", "a", {"n": 99}, expected_version=1)
    async with store.transaction() as tx:
        state = await tx.state.get(ns, "t", "a")
    assert state is not None and (state.state, state.version) == ({"n": 1}, 2)


async def test_update_of_a_missing_document_creates_nothing(store: StateStore, ns: str) -> None:
    with pytest.raises(NotFoundError):
        async with store.transaction() as tx:
            await tx.state.update(ns, "t", "a", {"n": 1})
    async with store.transaction() as tx:
        assert await tx.state.get(ns, "t", "a") is None


async def test_state_is_scoped_to_task_and_agent(store: StateStore, ns: str) -> None:
    async with store.transaction() as tx:
        await tx.state.create(ns, "task_123", "analyst-agent", {"who": "analyst"})
        await tx.state.create(ns, "task_123", "reporter-agent", {"who": "reporter"})
        await tx.state.create(ns, "task_456", "analyst-agent", {"who": "analyst-456"})
        await tx.state.create(ns + "x", "task_123", "analyst-agent", {"who": "elsewhere"})
    async with store.transaction() as tx:
        await tx.state.update(ns, "task_123", "analyst-agent", {"who": "analyst", "done": True})
    async with store.transaction() as tx:
        everything = await tx.state.list(ns)
        one_task = await tx.state.list(ns, task_id="task_123")
        other_ns = await tx.state.get(ns + "x", "task_123", "analyst-agent")
    assert [(s.task_id, s.agent_id, s.version) for s in everything] == [
        ("task_123", "analyst-agent", 2),
        ("task_123", "reporter-agent", 1),
        ("task_456", "analyst-agent", 1),
    ]
    assert [s.state["who"] for s in one_task] == ["analyst", "reporter"]
    assert other_ns is not None and other_ns.state == {"who": "elsewhere"}


async def test_documents_round_trip_exactly(store: StateStore, ns: str) -> None:
    document = {
        "conversation": {"turn_count": 42, "topic": "customer_support"},
        "user_profile": {"preferences": {"language": "en", "tz": "UTC"}, "tier": "premium"},
        "unicode": "naïve café — 日本語 🙂",
        "numbers": [0, -1, 2**53, 1.5, 1e-7],
        "empty": {},
        "flags": [True, False, None],
    }
    async with store.transaction() as tx:
        await tx.state.create(ns, "t", "a", document)
    async with store.transaction() as tx:
        state = await tx.state.get(ns, "t", "a")
    assert state is not None and state.state == document


async def test_state_limit_is_exact_and_writes_nothing_when_exceeded(
    store: StateStore, ns: str
) -> None:
    at_limit = _document(MAX_STATE_BYTES)
    async with store.transaction() as tx:
        await tx.state.create(ns, "t", "a", {"small": True})
        # Exactly the limit is allowed, on every backend.
        await tx.state.create(ns, "t", "full", at_limit)
    async with store.transaction() as tx:
        stored = await tx.state.get(ns, "t", "full")
    assert stored is not None and stored.state == at_limit

    over = _document(MAX_STATE_BYTES + 1)
    with pytest.raises(StateTooLargeError):
        async with store.transaction() as tx:
            await tx.state.create(ns, "t", "new", over)
    with pytest.raises(StateTooLargeError):
        async with store.transaction() as tx:
            await tx.state.update(ns, "t", "a", over)
    async with store.transaction() as tx:
        assert await tx.state.get(ns, "t", "new") is None
        unchanged = await tx.state.get(ns, "t", "a")
    assert unchanged is not None and (unchanged.state, unchanged.version) == ({"small": True}, 1)


async def test_size_is_measured_in_utf8_bytes(store: StateStore, ns: str) -> None:
    # 'é' is one character but two bytes: fewer characters than the limit can be over it.
    over = _document(MAX_STATE_BYTES + 1, "é")
    assert len(over["blob"]) < MAX_STATE_BYTES
    with pytest.raises(StateTooLargeError):
        async with store.transaction() as tx:
            await tx.state.create(ns, "t", "a", over)
    async with store.transaction() as tx:
        assert await tx.state.get(ns, "t", "a") is None


async def test_restore_keeps_versions_and_timestamps(
    store: StateStore, ns: str, clock: FakeClock
) -> None:
    async with store.transaction() as tx:
        await tx.state.create(ns, "t", "a", {"v": 1})
        await tx.state.update(ns, "t", "a", {"v": 2})
        await tx.state.create(ns, "t", "b", {"v": 1})
        exported = await tx.state.list(ns)
    other = ns + "copy"
    moved = [s.model_copy(update={"namespace": other}) for s in exported]
    clock.advance(100)
    async with store.transaction() as tx:
        await tx.state.restore(moved)
    async with store.transaction() as tx:
        assert await tx.state.list(other) == moved
        updated = await tx.state.update(other, "t", "a", {"v": 3}, expected_version=2)
    assert updated.version == 3
