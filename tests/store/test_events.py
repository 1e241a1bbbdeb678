"""The change feed on every backend: events recorded with the commit (never for a rollback),
numbered 1, 2, 3, ... per namespace without gaps, followed live without missing one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from statecore.contract._activities import CommitTurnInput, FlowOp, KVOp, OrchestrationOp, StateOp
from statecore.core._change_events import ChangeEvent
from statecore.core._errors import InvalidLimitError
from statecore.core._models import Message, SessionRef, TokenUsage
from statecore.core._tokens import TokenCounter
from statecore.operations._compaction import CompactionRequest
from statecore.operations._control_plane import compact, reset
from statecore.operations._turn_commit import commit_turn
from statecore.store import StateStore
from statecore.store._feed import follow_events, read_events
from tests.store.conftest import FakeClock

SECRET = "the-content-never-travels"


def _turn(ref: SessionRef, n: int, **extra: object) -> CommitTurnInput:
    return CommitTurnInput(
        ref=ref,
        turn_id=f"t{n}",
        turn=n,
        messages=[Message(role="user", content=f"{SECRET} {n}")],
        **extra,  # type: ignore[arg-type]
    )


async def _commit(store: StateStore, commit: CommitTurnInput) -> None:
    async with store.transaction() as tx:
        await commit_turn(tx, commit)


async def test_a_turn_records_one_event_per_kind_of_change_without_content(
    store: StateStore, ref: SessionRef
) -> None:
    await _commit(
        store,
        _turn(
            ref,
            1,
            kv=[KVOp(op="put", bucket="notes", key="k", value=SECRET)],
            state=StateOp(state={"secret": SECRET}),
            flow=[FlowOp(flow_id="f", step="s", data={"x": SECRET})],
        ),
    )
    events = await read_events(store, ref.namespace)
    assert [e.kind for e in events] == ["messages", "kv", "state", "flow"]
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert all((e.agent_id, e.session_id, e.turn_id) == (ref.agent_id, "s1", "t1") for e in events)
    assert events[0].detail["first_seq"] == 1 and events[0].detail["count"] == 1
    assert events[2].detail["version"] == 1 and events[2].detail["bytes"] > 0
    assert SECRET not in repr([e.detail for e in events])
    # A duplicate commit of the same turn records nothing more.
    await _commit(store, _turn(ref, 1))
    async with store.transaction(read_only=True) as tx:
        assert await tx.events.last_seq(ref.namespace) == 4


async def test_a_chat_turn_writes_one_event_carrying_its_usage(
    store: StateStore, ref: SessionRef
) -> None:
    """A model turn's usage rides on its ``messages`` event; ``orchestration`` appears only
    when the step or tools moved, or when tokens were used with no message stored."""
    usage = TokenUsage(prompt_tokens=30, completion_tokens=12)
    await _commit(store, _turn(ref, 1, usage=usage))
    await _commit(
        store,
        _turn(ref, 2, usage=usage, orchestration=OrchestrationOp(used_tools=["search"])),
    )
    await _commit(
        store,
        _turn(ref, 3, usage=usage).model_copy(update={"messages": []}),
    )
    events = await read_events(store, ref.namespace)
    assert [(e.turn_id, e.kind) for e in events] == [
        ("t1", "messages"),
        ("t2", "messages"),
        ("t2", "orchestration"),
        ("t3", "orchestration"),
    ]
    assert events[0].detail["usage_tokens"] == 42
    assert events[2].detail == {"tokens": 42, "tools": 1}
    assert events[3].detail["tokens"] == 42


async def test_a_rolled_back_change_records_nothing_and_takes_no_number(
    store: StateStore, ref: SessionRef
) -> None:
    await _commit(store, _turn(ref, 1))
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await commit_turn(tx, _turn(ref, 2))
            raise RuntimeError("the turn fails after its writes")
    await _commit(store, _turn(ref, 3))
    assert [(e.seq, e.turn_id) for e in await read_events(store, ref.namespace)] == [
        (1, "t1"),
        (2, "t3"),
    ]


async def test_reset_and_compaction_are_events(
    store: StateStore, ref: SessionRef, token_counter: TokenCounter
) -> None:
    for n in range(1, 5):
        await _commit(store, _turn(ref, n))
    await compact(
        store, ref, CompactionRequest(strategy="recent", max_messages=1), counter=token_counter
    )
    await reset(store, ref, stores=["conversation"])
    kinds = [e.kind for e in await read_events(store, ref.namespace)]
    assert kinds[-2:] == ["compaction", "reset"]
    last = (await read_events(store, ref.namespace, after=5))[-1]
    assert last.detail["stores"] == {"conversation": 4}


async def test_feeds_are_per_namespace(
    store: StateStore, make_ref: Callable[..., SessionRef]
) -> None:
    a, b = make_ref("s1"), make_ref("s1", namespace=f"{make_ref().namespace}b")
    await _commit(store, _turn(a, 1))
    await _commit(store, _turn(b, 1))
    assert [e.seq for e in await read_events(store, a.namespace)] == [1]
    assert [e.namespace for e in await read_events(store, b.namespace)] == [b.namespace]


async def test_sweep_by_count_and_age_keeps_the_numbering(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    for n in range(1, 6):
        await _commit(store, _turn(ref, n))
        clock.advance(60)
    async with store.transaction() as tx:
        assert await tx.events.sweep(keep_last=3, namespace=ref.namespace) == 2
    assert [e.seq for e in await read_events(store, ref.namespace)] == [3, 4, 5]
    async with store.transaction() as tx:
        removed = await tx.events.sweep(
            older_than=clock() - timedelta(seconds=90), namespace=ref.namespace
        )
    assert removed == 2
    await _commit(store, _turn(ref, 6))
    assert [e.seq for e in await read_events(store, ref.namespace)] == [5, 6]
    with pytest.raises(InvalidLimitError):
        async with store.transaction() as tx:
            await tx.events.sweep(keep_last=-1)


async def test_concurrent_commits_are_numbered_without_gaps_and_a_follower_misses_none(
    store: StateStore, make_ref: Callable[..., SessionRef]
) -> None:
    writers, turns = 6, 5
    namespace = make_ref().namespace
    got: list[ChangeEvent] = []

    async def follow() -> None:
        async for event in follow_events(store, namespace, poll_interval=0.02, idle_timeout=5):
            got.append(event)
            if len(got) == writers * turns:
                return

    async def write(w: int) -> None:
        for n in range(1, turns + 1):
            # Each in its own session: commits of one namespace run side by side.
            ref = make_ref(f"s{w}")
            for _ in range(20):
                try:
                    await _commit(store, _turn(ref, n))
                    break
                except Exception as exc:
                    if not store.is_transient_error(exc):
                        raise
                    await asyncio.sleep(0.01)

    follower = asyncio.create_task(follow())
    await asyncio.gather(*(write(w) for w in range(writers)))
    await asyncio.wait_for(follower, 30)
    assert [e.seq for e in got] == list(range(1, writers * turns + 1))
    assert len({(e.session_id, e.turn_id) for e in got}) == writers * turns


async def test_a_follower_is_woken_by_a_commit_and_every_wait_is_bounded(
    store: StateStore, ref: SessionRef
) -> None:
    await _commit(store, _turn(ref, 1))
    # A long poll interval: only a push (PostgreSQL) delivers quickly; others wait one tick.
    pushed = store.dialect == "postgresql"
    interval = 30.0 if pushed else 0.05
    got: list[ChangeEvent] = []
    delivered = asyncio.Event()

    async def follow() -> None:
        async for event in follow_events(
            store, ref.namespace, poll_interval=interval, max_wait=30, idle_timeout=20
        ):
            got.append(event)
            if event.seq == 2:
                delivered.set()
                return

    follower = asyncio.create_task(follow())
    await asyncio.sleep(0.3)  # the follower has read seq 1 and waits
    assert [e.seq for e in got] == [1]
    started = time.monotonic()
    await _commit(store, _turn(ref, 2))
    await asyncio.wait_for(delivered.wait(), 10)
    assert time.monotonic() - started < 5
    await follower
    # With nothing new, idle_timeout ends the iteration.
    started = time.monotonic()
    rest = [e async for e in follow_events(store, ref.namespace, after=2, idle_timeout=0.3)]
    assert rest == [] and time.monotonic() - started < 5
    with pytest.raises(InvalidLimitError):
        async for _ in follow_events(store, ref.namespace, poll_interval=0):
            pass
