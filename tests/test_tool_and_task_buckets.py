"""The tools and task slots over real stores: memory and a SQLite file (PostgreSQL when up)."""

from __future__ import annotations

import asyncio

import pytest

from statecore.core._errors import (
    ConflictError,
    InvalidIdentifierError,
    InvalidInputError,
    NotFoundError,
)
from statecore.core._models import SessionRef
from statecore.operations._turn_commit import TURN_BUCKET, TURN_META_BUCKET
from statecore.store._bucket_owners import (
    bucket_key_counts,
    bucket_store,
    clear_store,
    store_key_counts,
)
from statecore.store._tool_and_task_buckets import (
    TASK_BUCKET,
    TaskSlots,
    ToolSlots,
    validate_user_bucket,
)
from tests.store_backends import BACKENDS, open_backend

REF = SessionRef(namespace="ns1", agent_id="agent", session_id="s1")
OTHER = SessionRef(namespace="ns1", agent_id="agent", session_id="s2")


@pytest.fixture(params=[*BACKENDS, pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request, tmp_path):
    async with open_backend(request.param, tmp_path) as store:
        async with store.transaction() as tx:
            await tx.sessions.ensure(REF)
            await tx.sessions.ensure(OTHER)
        yield store


@pytest.mark.parametrize(
    "bucket", ["tool.search", "task.records", "task.x", "tool", "task", "turn", "turn.meta"]
)
def test_reserved_buckets_are_refused(bucket):
    with pytest.raises(InvalidIdentifierError, match="reserved"):
        validate_user_bucket(bucket)


@pytest.mark.parametrize("bucket", ["tools", "tasks", "toolbox", "prefs", "t", "too_", "turnip"])
def test_ordinary_buckets_pass(bucket):
    assert validate_user_bucket(bucket) == bucket
    assert bucket_store(bucket) == "kv"


def test_turn_records_belong_to_the_conversation():
    assert bucket_store(TURN_BUCKET) == bucket_store(TURN_META_BUCKET) == "conversation"


def test_malformed_bucket_is_refused():
    with pytest.raises(InvalidIdentifierError):
        validate_user_bucket("../etc")


async def test_tool_data_round_trip_and_isolation(store):
    async with store.transaction() as tx:
        tools = ToolSlots(tx, REF)
        assert await tools.put("web", "cache:a", {"hits": 1}) == 1
        assert await tools.put("web", "cache:a", {"hits": 2}) == 2
        await tools.put("web", "cache:b", b"\x00raw")
        await tools.put("websearch", "cache:a", "other tool")
        await ToolSlots(tx, OTHER).put("web", "cache:a", "other session")
    async with store.transaction() as tx:
        tools = ToolSlots(tx, REF)
        entry = await tools.get("web", "cache:a")
        assert entry is not None and entry.value == {"hits": 2} and entry.revision == 2
        raw = await tools.get("web", "cache:b")
        assert raw is not None and raw.value == b"\x00raw"
        assert (await tools.list("web", "cache:")).keys == ["cache:a", "cache:b"]
        assert await tools.tools() == ["web", "websearch"]
        assert await tools.delete("web", "cache:b") is True
        assert await tools.delete("web", "cache:b") is False
    async with store.transaction() as tx:
        # "web" is a prefix of "websearch": clearing one tool must not touch the other.
        assert await ToolSlots(tx, REF).clear("web") == 1
    async with store.transaction() as tx:
        tools = ToolSlots(tx, REF)
        assert await tools.get("web", "cache:a") is None
        websearch = await tools.get("websearch", "cache:a")
        assert websearch is not None and websearch.value == "other tool"
        other = await ToolSlots(tx, OTHER).get("web", "cache:a")
        assert other is not None and other.value == "other session"
        assert await tools.clear() == 1
        assert await tools.tools() == []


async def test_tool_revision_guard(store):
    async with store.transaction() as tx:
        await ToolSlots(tx, REF).put("web", "k", 1)
    with pytest.raises(ConflictError):
        async with store.transaction() as tx:
            await ToolSlots(tx, REF).put("web", "k", 2, expected_revision=5)
    async with store.transaction() as tx:
        entry = await ToolSlots(tx, REF).get("web", "k")
        assert entry is not None and entry.value == 1


async def test_bad_tool_name_is_refused_and_nothing_written(store):
    with pytest.raises(InvalidIdentifierError):
        async with store.transaction() as tx:
            await ToolSlots(tx, REF).put("bad/tool", "k", 1)
    async with store.transaction() as tx:
        assert await tx.kv.buckets(REF.kv_scope) == []


async def test_each_kv_store_counts_and_clears_only_its_own_buckets(store):
    scope = REF.kv_scope
    async with store.transaction() as tx:
        await tx.kv.put(scope, "prefs", "theme", "dark")
        # Lookalikes: under an unescaped SQL LIKE "too_" matches "tool."; "t" and "turnip"
        # share a prefix with reserved names ("turnip" even extends the "turn" bucket).
        for bucket in ("too_", "t", "turnip"):
            await tx.kv.put(scope, bucket, "k", 1)
        await ToolSlots(tx, REF).put("search", "k", 1)
        await TaskSlots(tx, REF).upsert("task-1", {"a": 1})
        await tx.kv.put(scope, TURN_BUCKET, "turn-1", {"turn": 1})
        await tx.kv.put(scope, TURN_META_BUCKET, "latest", {"turn": 1})
        assert await store_key_counts(tx.kv, scope) == {
            "conversation": 2,
            "kv": 4,
            "tools": 1,
            "task": 1,
        }
        counts = await bucket_key_counts(tx.kv, scope)
        assert counts["turn"] == 1 and counts["turnip"] == 1 and counts["t"] == 1
    async with store.transaction() as tx:
        assert await clear_store(tx.kv, scope, "kv") == 4
    async with store.transaction() as tx:
        assert await store_key_counts(tx.kv, scope) == {
            "conversation": 2,
            "kv": 0,
            "tools": 1,
            "task": 1,
        }
        await tx.kv.put(scope, "turnip", "k", 1)
        assert await clear_store(tx.kv, scope, "conversation") == 2
    async with store.transaction() as tx:
        assert await store_key_counts(tx.kv, scope) == {
            "conversation": 0,
            "kv": 1,
            "tools": 1,
            "task": 1,
        }


async def test_task_lifecycle_records_history(store):
    async with store.transaction() as tx:
        tasks = TaskSlots(tx, REF)
        created = await tasks.upsert("task-1", {"title": "report"})
        assert created.state == "submitted"
        assert [t.to_state for t in created.state_history] == ["submitted"]
        assert created.state_history[0].from_state is None
        await tasks.transition("task-1", "working", "picked up")
    async with store.transaction() as tx:
        tasks = TaskSlots(tx, REF)
        await tasks.upsert("task-1", {"title": "report v2"})
        done = await tasks.transition("task-1", "completed")
    assert done.metadata == {"title": "report v2"}
    assert [(t.from_state, t.to_state) for t in done.state_history] == [
        (None, "submitted"),
        ("submitted", "working"),
        ("working", "completed"),
    ]
    assert done.state_history[1].reason == "picked up"
    async with store.transaction() as tx:
        tasks = TaskSlots(tx, REF)
        assert await tasks.get("task-1") == done
        await tasks.upsert("task-0", {})
        assert [r.task_id for r in await tasks.list()] == ["task-0", "task-1"]
        assert await TaskSlots(tx, OTHER).list() == []
        assert await tx.kv.buckets(REF.kv_scope) == [TASK_BUCKET]


async def test_transition_of_unknown_task_is_not_found(store):
    with pytest.raises(NotFoundError, match="upsert it first"):
        async with store.transaction() as tx:
            await TaskSlots(tx, REF).transition("nope", "working")


@pytest.mark.parametrize(
    ("state", "reason", "error"),
    [("bad state", "", InvalidIdentifierError), ("working", "x" * 5000, InvalidInputError)],
)
async def test_bad_transition_leaves_record_unchanged(store, state, reason, error):
    async with store.transaction() as tx:
        before = await TaskSlots(tx, REF).upsert("task-1", {})
    with pytest.raises(error):
        async with store.transaction() as tx:
            await TaskSlots(tx, REF).transition("task-1", state, reason)
    async with store.transaction() as tx:
        assert await TaskSlots(tx, REF).get("task-1") == before


async def test_concurrent_transitions_never_lose_history(store):
    """Two transactions move the same task at once. Each either lands in the history or
    fails with a conflict; none is silently overwritten."""
    async with store.transaction() as tx:
        await TaskSlots(tx, REF).upsert("task-1", {})
    first_written = asyncio.Event()

    async def first() -> str:
        async with store.transaction() as tx:
            await TaskSlots(tx, REF).transition("task-1", "working", "first")
            first_written.set()
            await asyncio.sleep(0.3)  # hold the write open while the second one runs
        return "working"

    async def second() -> str:
        await first_written.wait()
        async with store.transaction() as tx:
            await TaskSlots(tx, REF).transition("task-1", "canceled", "second")
        return "canceled"

    outcomes = await asyncio.gather(first(), second(), return_exceptions=True)
    landed = [o for o in outcomes if isinstance(o, str)]
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert all(isinstance(f, ConflictError) for f in failed), failed
    async with store.transaction() as tx:
        record = await TaskSlots(tx, REF).get("task-1")
    assert record is not None
    assert [t.to_state for t in record.state_history[1:]] == landed
    assert record.state == landed[-1]
