"""Conformance: AgentDock orchestration state (OrchestrationStore) on every backend."""

from __future__ import annotations

import pytest

from statecore.core._errors import SessionNotFoundError
from statecore.core._limits import MAX_RECENT_TOOLS
from statecore.core._models import OrchestrationUpdate, SessionRef, TokenUsage
from statecore.store import StateStore
from tests.store.conftest import FakeClock
from tests.store.helpers import ensure


async def test_get_or_create_starts_from_defaults(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    await ensure(store, ref, ttl_seconds=600)
    async with store.transaction() as tx:
        assert await tx.orchestration.get(ref) is None
        created = await tx.orchestration.get_or_create(ref)
    assert created.active_step is None and created.recently_used_tools == []
    assert created.sequence_index == 0 and created.cumulative_token_usage == TokenUsage()
    # Last access and TTL are the session's own: one idle clock per session.
    assert (created.last_accessed, created.ttl_seconds) == (clock(), 600)
    clock.advance(1)
    async with store.transaction() as tx:
        assert await tx.orchestration.get_or_create(ref) == created
        assert await tx.orchestration.get(ref) == created


async def test_partial_update_keeps_the_other_fields(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        orch = tx.orchestration
        await orch.update(
            ref,
            OrchestrationUpdate(
                active_step="research",
                recently_used_tools=["search", "calc"],
                sequence_index=2,
                cumulative_token_usage=TokenUsage(prompt_tokens=10, completion_tokens=5),
            ),
        )
        after = await orch.update(ref, OrchestrationUpdate(sequence_index=3))
    assert after.active_step == "research"
    assert after.recently_used_tools == ["search", "calc"]
    assert after.sequence_index == 3
    assert after.cumulative_token_usage == TokenUsage(prompt_tokens=10, completion_tokens=5)
    async with store.transaction() as tx:
        assert await tx.orchestration.get(ref) == after


async def test_update_of_ttl_sets_the_session_ttl(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        state = await tx.orchestration.update(ref, OrchestrationUpdate(ttl_seconds=90))
        info = await tx.sessions.get(ref)
    assert state.ttl_seconds == 90
    assert info is not None and info.ttl_seconds == 90


async def test_mutations_restart_the_idle_clock(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    await ensure(store, ref)
    now = clock.advance(3600)
    async with store.transaction() as tx:
        state = await tx.orchestration.add_used_tool(ref, "search")
        info = await tx.sessions.get(ref)
    assert state.last_accessed == now
    assert info is not None and info.last_accessed == now


async def test_recently_used_tools_are_distinct_recent_last_and_bounded(
    store: StateStore, ref: SessionRef
) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        orch = tx.orchestration
        await orch.add_used_tool(ref, "search")
        await orch.add_used_tool(ref, "calc")
        state = await orch.add_used_tool(ref, "search")
    assert state.recently_used_tools == ["calc", "search"]

    tools = [f"tool-{n:02d}" for n in range(MAX_RECENT_TOOLS + 5)]
    async with store.transaction() as tx:
        for tool in tools:
            state = await tx.orchestration.add_used_tool(ref, tool)
    assert state.recently_used_tools == tools[-MAX_RECENT_TOOLS:]

    async with store.transaction() as tx:
        state = await tx.orchestration.update(
            ref, OrchestrationUpdate(recently_used_tools=["a", "b", "a", *tools])
        )
        stored = await tx.orchestration.get(ref)
    assert state.recently_used_tools == tools[-MAX_RECENT_TOOLS:]
    assert stored == state


async def test_step_sequence_and_token_usage(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        orch = tx.orchestration
        await orch.set_active_step(ref, "gathering_info")
        await orch.advance_sequence(ref)
        await orch.advance_sequence(ref)
        await orch.add_token_usage(ref, 100, 20)
        state = await orch.add_token_usage(ref, 1, 2)
    assert state.active_step == "gathering_info" and state.sequence_index == 2
    assert state.cumulative_token_usage == TokenUsage(prompt_tokens=101, completion_tokens=22)
    async with store.transaction() as tx:
        cleared = await tx.orchestration.set_active_step(ref, None)
    assert cleared.active_step is None and cleared.sequence_index == 2


async def test_reset_and_restore(store: StateStore, make_ref, ref: SessionRef) -> None:
    copy = make_ref("copy")
    await ensure(store, ref, copy)
    async with store.transaction() as tx:
        assert await tx.orchestration.reset(ref) is False
        await tx.orchestration.set_active_step(ref, "step-1")
        await tx.orchestration.add_used_tool(ref, "search")
        state = await tx.orchestration.add_token_usage(ref, 3, 4)
    async with store.transaction() as tx:
        await tx.orchestration.restore(copy, state)
        assert await tx.orchestration.reset(ref) is True
    async with store.transaction() as tx:
        assert await tx.orchestration.get(ref) is None
        restored = await tx.orchestration.get(copy)
        fresh = await tx.orchestration.get_or_create(ref)
    assert restored is not None
    assert restored.model_dump(exclude={"last_accessed", "ttl_seconds"}) == state.model_dump(
        exclude={"last_accessed", "ttl_seconds"}
    )
    assert fresh.active_step is None and fresh.recently_used_tools == []


async def test_orchestration_is_per_session(store: StateStore, make_ref, ref: SessionRef) -> None:
    sibling = make_ref("s2")
    await ensure(store, ref, sibling)
    async with store.transaction() as tx:
        await tx.orchestration.set_active_step(ref, "mine")
    async with store.transaction() as tx:
        assert await tx.orchestration.get(sibling) is None


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda o, r: o.get(r), id="get"),
        pytest.param(lambda o, r: o.get_or_create(r), id="get_or_create"),
        pytest.param(lambda o, r: o.update(r, OrchestrationUpdate()), id="update"),
        pytest.param(lambda o, r: o.set_active_step(r, "s"), id="set_active_step"),
        pytest.param(lambda o, r: o.add_used_tool(r, "t"), id="add_used_tool"),
        pytest.param(lambda o, r: o.advance_sequence(r), id="advance_sequence"),
        pytest.param(lambda o, r: o.add_token_usage(r, 1, 1), id="add_token_usage"),
        pytest.param(lambda o, r: o.reset(r), id="reset"),
    ],
)
async def test_every_method_needs_the_session(store: StateStore, ref: SessionRef, call) -> None:
    with pytest.raises(SessionNotFoundError):
        async with store.transaction() as tx:
            await call(tx.orchestration, ref)
    async with store.transaction() as tx:
        assert await tx.sessions.get(ref) is None
