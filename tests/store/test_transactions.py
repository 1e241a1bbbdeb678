"""Conformance: transactions are atomic, isolated and serialise concurrent writers."""

from __future__ import annotations

import asyncio

import pytest

from statecore.core._errors import InvalidInputError, RevisionConflictError, StatecoreError
from statecore.core._models import KVScope, OrchestrationUpdate, SessionRef
from statecore.store import StateStore, run_transaction
from tests.store.conftest import FakeClock
from tests.store.helpers import assistant, ensure, snapshot, user


class _Abort(Exception):
    pass


async def _write_everywhere(tx, ref: SessionRef, label: str) -> None:
    await tx.sessions.ensure(ref)
    await tx.conversation.append(ref, f"turn-{label}", [user(label), assistant(label)])
    await tx.conversation.set_system_prompt(ref, f"prompt {label}")
    await tx.conversation.add_hint(ref, f"hint {label}")
    await tx.conversation.set_summary(ref, f"summary {label}", 1)
    await tx.flow.save(ref, "plan", label, {"label": label})
    await tx.orchestration.update(ref, OrchestrationUpdate(active_step=label, sequence_index=7))
    await tx.kv.put(ref.kv_scope, "b", f"key-{label}", label)
    await tx.kv.put(ref.kv_scope, "b", "shared", label)
    await tx.kv.put(KVScope(namespace=ref.namespace), "b", f"ns-{label}", label)
    await tx.state.create(ref.namespace, f"{ref.session_id}-{label}", ref.agent_id, {"n": label})


async def test_a_block_that_raises_leaves_nothing(
    store: StateStore, make_ref, ref: SessionRef, ns: str
) -> None:
    brand_new = make_ref("new")
    async with store.transaction() as tx:
        await _write_everywhere(tx, ref, "committed")
    before = await snapshot(store, ns, [ref, brand_new])

    with pytest.raises(_Abort):
        async with store.transaction() as tx:
            await _write_everywhere(tx, ref, "rolled-back")
            await _write_everywhere(tx, brand_new, "rolled-back")
            await tx.kv.delete(ref.kv_scope, "b", "key-committed")
            await tx.state.delete(ns, f"{ref.session_id}-committed", ref.agent_id)
            await tx.flow.clear(ref)
            # The block sees its own writes...
            assert await tx.sessions.get(brand_new) is not None
            raise _Abort
    # ...and after the rollback nobody does.
    assert await snapshot(store, ns, [ref, brand_new]) == before


async def test_a_failed_call_rolls_back_earlier_writes_of_the_block(
    store: StateStore, ref: SessionRef, ns: str
) -> None:
    await ensure(store, ref)
    before = await snapshot(store, ns, [ref])
    with pytest.raises(RevisionConflictError):
        async with store.transaction() as tx:
            await tx.conversation.append(ref, "t", [user("written first")])
            await tx.kv.put(ref.kv_scope, "b", "k", 1)
            await tx.kv.put(ref.kv_scope, "b", "k", 2, expected_revision=5)
    assert await snapshot(store, ns, [ref]) == before


async def test_concurrent_reader_sees_all_of_a_block_or_none(
    store: StateStore, ref: SessionRef
) -> None:
    scope = ref.kv_scope
    first_written, release = asyncio.Event(), asyncio.Event()

    async def writer() -> None:
        async with store.transaction() as tx:
            await tx.kv.put(scope, "b", "first", 1)
            first_written.set()
            await release.wait()
            await tx.kv.put(scope, "b", "second", 2)

    async def reader() -> tuple[bool, bool]:
        await first_written.wait()
        async with store.transaction() as tx:
            first = await tx.kv.get(scope, "b", "first")
            second = await tx.kv.get(scope, "b", "second")
        return first is not None, second is not None

    writing = asyncio.create_task(writer())
    reading = asyncio.create_task(reader())
    await first_written.wait()
    await asyncio.sleep(0.05)  # let the reader run (or block) while the writer is mid-block
    release.set()
    await asyncio.wait_for(writing, 30)
    seen = await asyncio.wait_for(reading, 30)
    assert seen in {(False, False), (True, True)}


async def test_now_is_read_once_per_transaction(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    opened_at = clock()
    async with store.transaction() as tx:
        assert tx.now == opened_at
        clock.advance(120)
        info = await tx.sessions.ensure(ref)
        assert tx.now == opened_at
    assert info.created_at == opened_at
    async with store.transaction() as tx:
        assert tx.now == clock()


async def test_module_objects_end_with_their_block(store: StateStore, ref: SessionRef) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(ref)
        kv = tx.kv
    with pytest.raises(StatecoreError):
        await kv.put(ref.kv_scope, "b", "late", 1)
    with pytest.raises(StatecoreError):
        await tx.sessions.get(ref)
    async with store.transaction() as fresh:
        assert await fresh.kv.get(ref.kv_scope, "b", "late") is None


async def test_concurrent_turns_get_contiguous_seqs(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)

    async def turn(n: int):
        async with store.transaction() as tx:
            return await tx.conversation.append(
                ref, f"turn-{n}", [user(f"q{n} " * (n + 1)), assistant(f"a{n}")]
            )

    results = await asyncio.gather(*(turn(n) for n in range(6)))
    for stored in results:
        assert stored[1].seq == stored[0].seq + 1  # a turn's messages stay together
    async with store.transaction() as tx:
        log = await tx.conversation.messages(ref)
        info = await tx.sessions.get(ref)
    assert [m.seq for m in log] == list(range(1, 13))
    running = 0
    for message in log:
        running += message.tokens
        assert message.cumulative_tokens == running
    assert info is not None and (info.last_seq, info.token_total) == (12, running)


async def test_compare_and_set_never_loses_an_update(store: StateStore, ref: SessionRef) -> None:
    scope = ref.kv_scope
    async with store.transaction() as tx:
        await tx.kv.put(scope, "b", "counter", 0)

    async def increment() -> bool:
        try:
            async with store.transaction() as tx:
                entry = await tx.kv.get(scope, "b", "counter")
                assert entry is not None
                await tx.kv.put(
                    scope, "b", "counter", entry.value + 1, expected_revision=entry.revision
                )
        except RevisionConflictError:
            return False
        return True

    outcomes = await asyncio.gather(*(increment() for _ in range(5)))
    async with store.transaction() as tx:
        entry = await tx.kv.get(scope, "b", "counter")
    assert any(outcomes)
    assert entry is not None
    # Every successful increment is counted exactly once.
    assert entry.value == sum(outcomes) and entry.revision == sum(outcomes) + 1


@pytest.mark.parametrize("flag", ["yes", 1, None])
async def test_read_only_must_be_a_bool(store: StateStore, ref: SessionRef, flag: object) -> None:
    """A truthy string must not silently open a transaction that skips the write lock."""
    await ensure(store, ref)
    before = await snapshot(store, ref.namespace, [ref])
    with pytest.raises(InvalidInputError, match="read_only"):
        store.transaction(read_only=flag)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="read_only"):
        await run_transaction(store, lambda tx: tx.sessions.get(ref), read_only=flag)  # type: ignore[arg-type]
    assert await snapshot(store, ref.namespace, [ref]) == before
    async with store.transaction(read_only=True) as tx:
        assert await tx.sessions.get(ref) is not None
