"""The writes of the isolation tests: one per store module and slot, each on one owner.

Each takes an open transaction and the tenants, changes something its owner holds, and
returns that owner; ``tests/test_isolation.py`` checks that nobody else's rows changed.
"""

from __future__ import annotations

from typing import Any

import pytest

from statecore.core._models import KVScope, Message, OrchestrationUpdate
from statecore.store._tool_and_task_buckets import TaskSlots, ToolSlots
from tests.isolation_data import TTL_SECONDS, Tenants, owner
from tests.sql_rows import Owner

WRITES: list[Any] = []


def write(fn: Any) -> Any:
    WRITES.append(pytest.param(fn, id=fn.__name__))
    return fn


@write
async def append(tx: Any, t: Tenants) -> Owner:
    await tx.conversation.append(t.victim, "t3", [Message(role="user", content="new")])
    return owner(t.victim)


@write
async def hints_and_summary(tx: Any, t: Tenants) -> Owner:
    hint = await tx.conversation.add_hint(t.victim, "another hint")
    await tx.conversation.remove_hint(t.victim, hint.id - 1)
    await tx.conversation.set_summary(t.victim, "a new summary", 4)
    await tx.conversation.set_window_start(t.victim, 4)
    await tx.conversation.set_system_prompt(t.victim, None)
    return owner(t.victim)


@write
async def clear_conversation(tx: Any, t: Tenants) -> Owner:
    assert await tx.conversation.clear(t.victim) == 4
    return owner(t.victim)


@write
async def kv_writes(tx: Any, t: Tenants) -> Owner:
    scope = t.victim.kv_scope
    await tx.kv.put(scope, "prefs", "theme", "light", expected_revision=1)
    await tx.kv.delete(scope, "blobs", "raw")
    await tx.kv.put(scope, "prefs", "lang", "en", ttl_seconds=TTL_SECONDS)
    return owner(t.victim)


@write
async def kv_clear(tx: Any, t: Tenants) -> Owner:
    assert await tx.kv.clear(t.victim.kv_scope) == 4
    return owner(t.victim)


@write
async def turn_records_clear(tx: Any, t: Tenants) -> Owner:
    assert await tx.turns.clear(t.victim) == 1
    return owner(t.victim)


@write
async def namespace_kv(tx: Any, t: Tenants) -> Owner:
    await tx.kv.put(KVScope(namespace=t.a), "shared", "k", {"changed": True})
    await tx.kv.clear(KVScope(namespace=t.a), "nothing-here")
    return (t.a, "", "")


@write
async def own_scoped_state(tx: Any, t: Tenants) -> Owner:
    v = t.victim
    await tx.state.update(v.namespace, v.session_id, v.agent_id, {"n": 2}, expected_version=1)
    return owner(v)


@write
async def task_scope_of_one_agent(tx: Any, t: Tenants) -> Owner:
    await tx.state.update(t.a, "task-1", "planner", {"n": 2})
    return (t.a, "planner", "task-1")


@write
async def delete_task_scope_of_one_agent(tx: Any, t: Tenants) -> Owner:
    assert await tx.state.delete(t.a, "task-1", "coder")
    return (t.a, "coder", "task-1")


@write
async def flow(tx: Any, t: Tenants) -> Owner:
    await tx.flow.save(t.victim, "plan", "three", {"n": 3})
    await tx.flow.save(t.victim, "other", "one", {})
    return owner(t.victim)


@write
async def flow_clear(tx: Any, t: Tenants) -> Owner:
    assert await tx.flow.clear(t.victim) == 2
    return owner(t.victim)


@write
async def orchestration(tx: Any, t: Tenants) -> Owner:
    await tx.orchestration.update(t.victim, OrchestrationUpdate(sequence_index=9))
    await tx.orchestration.add_used_tool(t.victim, "browser")
    await tx.orchestration.advance_sequence(t.victim)
    return owner(t.victim)


@write
async def orchestration_reset(tx: Any, t: Tenants) -> Owner:
    assert await tx.orchestration.reset(t.victim)
    return owner(t.victim)


@write
async def slots(tx: Any, t: Tenants) -> Owner:
    await ToolSlots(tx, t.victim).put("search", "last", {"new": True}, expected_revision=1)
    await ToolSlots(tx, t.victim).clear("search")
    await TaskSlots(tx, t.victim).transition("job-1", "done")
    return owner(t.victim)


@write
async def touch(tx: Any, t: Tenants) -> Owner:
    await tx.sessions.touch(t.victim)
    await tx.sessions.ensure(t.victim, ttl_seconds=2 * TTL_SECONDS)
    return owner(t.victim)


@write
async def delete_session(tx: Any, t: Tenants) -> Owner:
    assert await tx.sessions.delete(t.victim)
    return owner(t.victim)
