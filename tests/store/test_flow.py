"""Conformance: flow checkpoints with history (FlowStore) on every backend."""

from __future__ import annotations

import pytest

from statecore.core._errors import (
    AlreadyExistsError,
    InvalidLimitError,
    NotFoundError,
    SessionNotFoundError,
    StateTooLargeError,
)
from statecore.core._limits import MAX_STATE_BYTES
from statecore.core._models import SessionRef
from statecore.store import StateStore
from tests.store.conftest import FakeClock
from tests.store.helpers import ensure, user


async def test_versions_history_latest_and_load(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        first = await tx.flow.save(ref, "onboarding", "greeting", {"name": None})
        await tx.conversation.append(ref, "t1", [user("I'm Alice"), user("and Bob")])
    clock.advance(5)
    async with store.transaction() as tx:
        second = await tx.flow.save(ref, "onboarding", "authentication", {"name": "Alice"})
        other = await tx.flow.save(ref, "billing", "start", {})
    assert (first.version, second.version, other.version) == (1, 2, 1)
    # Each checkpoint remembers where the conversation was, so a fork can cut the log there.
    assert (first.conversation_seq, second.conversation_seq) == (0, 2)
    assert second.created_at == clock() and first.created_at < second.created_at

    async with store.transaction() as tx:
        flow = tx.flow
        assert await flow.latest(ref, "onboarding") == second
        assert await flow.load(ref, "onboarding", 1) == first
        assert await flow.history(ref, "onboarding") == [first, second]
        assert await flow.flows(ref) == ["billing", "onboarding"]
        assert await flow.count(ref) == 3
        assert await flow.latest(ref, "unknown") is None
        assert await flow.history(ref, "unknown") == []


async def test_load_of_a_missing_version(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.flow.save(ref, "f", "s", {})
    for flow_id, version in (("f", 2), ("other", 1)):
        with pytest.raises(NotFoundError):
            async with store.transaction() as tx:
                await tx.flow.load(ref, flow_id, version)
    with pytest.raises(InvalidLimitError):
        async with store.transaction() as tx:
            await tx.flow.load(ref, "f", 0)


async def test_flows_belong_to_their_session(store: StateStore, make_ref, ref) -> None:
    sibling, other_agent = make_ref("s2"), make_ref("s1", agent_id="agent-b")
    await ensure(store, ref, sibling, other_agent)
    async with store.transaction() as tx:
        await tx.flow.save(ref, "plan", "a", {"owner": "s1"})
        await tx.flow.save(sibling, "plan", "b", {"owner": "s2"})
    async with store.transaction() as tx:
        mine, theirs = await tx.flow.latest(ref, "plan"), await tx.flow.latest(sibling, "plan")
        assert await tx.flow.flows(other_agent) == []
        assert await tx.flow.clear(ref) == 1
        assert await tx.flow.count(sibling) == 1
    assert mine is not None and theirs is not None
    assert (mine.version, mine.data, theirs.version, theirs.data) == (
        1, {"owner": "s1"}, 1, {"owner": "s2"}
    )  # fmt: skip


async def test_restore_and_continue(store: StateStore, make_ref, ref: SessionRef) -> None:
    copy = make_ref("copy")
    await ensure(store, ref, copy)
    async with store.transaction() as tx:
        for step in ("one", "two", "three"):
            await tx.flow.save(ref, "plan", step, {"step": step})
        exported = await tx.flow.history(ref, "plan")
    async with store.transaction() as tx:
        await tx.flow.restore(copy, exported)
    async with store.transaction() as tx:
        assert await tx.flow.history(copy, "plan") == exported
        nxt = await tx.flow.save(copy, "plan", "four", {})
    assert nxt.version == 4
    with pytest.raises(AlreadyExistsError):
        async with store.transaction() as tx:
            await tx.flow.restore(copy, exported[:1])
    async with store.transaction() as tx:
        assert await tx.flow.count(copy) == 4


async def test_data_over_16_mb_is_refused(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    with pytest.raises(StateTooLargeError):
        async with store.transaction() as tx:
            await tx.flow.save(ref, "f", "s", {"blob": "x" * MAX_STATE_BYTES})
    async with store.transaction() as tx:
        assert await tx.flow.count(ref) == 0


async def test_clear_returns_the_number_removed(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.flow.save(ref, "a", "s", {})
        await tx.flow.save(ref, "a", "s", {})
        await tx.flow.save(ref, "b", "s", {})
        assert await tx.flow.clear(ref) == 3
        assert await tx.flow.clear(ref) == 0
    async with store.transaction() as tx:
        assert await tx.flow.flows(ref) == []
        # Versions start over after a clear.
        assert (await tx.flow.save(ref, "a", "s", {})).version == 1


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda f, r: f.save(r, "f", "s", {}), id="save"),
        pytest.param(lambda f, r: f.latest(r, "f"), id="latest"),
        pytest.param(lambda f, r: f.load(r, "f", 1), id="load"),
        pytest.param(lambda f, r: f.history(r, "f"), id="history"),
        pytest.param(lambda f, r: f.flows(r), id="flows"),
        pytest.param(lambda f, r: f.count(r), id="count"),
        pytest.param(lambda f, r: f.restore(r, []), id="restore"),
        pytest.param(lambda f, r: f.clear(r), id="clear"),
    ],
)
async def test_every_method_needs_the_session(store: StateStore, ref: SessionRef, call) -> None:
    with pytest.raises(SessionNotFoundError):
        async with store.transaction() as tx:
            await call(tx.flow, ref)
