"""A turn commit's last writes (``StoreTransaction.finish_turn``) on every backend: its token
usage, its record, the latest-turn marker and its change-feed events, as one statement on
PostgreSQL and one write at a time elsewhere, writing the same rows either way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import event

from statecore.core._change_events import NewEvent
from statecore.core._errors import RevisionConflictError, StatecoreError
from statecore.core._models import SessionRef, TokenUsage
from statecore.store import StateStore
from statecore.store._base import StoreTransaction
from statecore.store._feed import read_events

MARKER_BUCKET = "turn.meta"


def _events(ref: SessionRef, turn: int) -> list[NewEvent]:
    return [
        NewEvent.of("messages", ref, turn_id=f"t{turn}", first_seq=turn, count=1),
        NewEvent.of("kv", ref, turn_id=f"t{turn}", count=2),
    ]


def _usage(turn: int) -> TokenUsage:
    # Turn 2 used no tokens: nothing to count.
    return TokenUsage(prompt_tokens=0 if turn == 2 else 100 * turn, completion_tokens=turn)


async def _finish(
    store: StateStore, ref: SessionRef, turn: int, *, steps: bool = False, events: bool = True
) -> None:
    """Finish turn ``turn`` of ``ref`` in a transaction of its own: through the backend's
    ``finish_turn``, or (``steps``) through the contract's default, one write at a time."""
    async with store.transaction() as tx:
        await tx.sessions.ensure(ref)
        finish = StoreTransaction.finish_turn if steps else type(tx).finish_turn
        await finish(
            tx,
            ref,
            f"t{turn}",
            {"turn": turn, "reply": f"stored {turn}"},
            (MARKER_BUCKET, "latest", {"turn": turn}),
            _events(ref, turn) if events else [],
            _usage(turn) if turn != 2 else TokenUsage(),
        )


async def _written(store: StateStore, ref: SessionRef, turns: int) -> dict[str, Any]:
    """What the finished turns left, without the namespace (the two runs use two)."""
    async with store.transaction(read_only=True) as tx:
        records = [await tx.turns.get(ref, f"t{n}") for n in range(1, turns + 1)]
        marker = await tx.kv.get(ref.kv_scope, MARKER_BUCKET, "latest")
        orchestration = await tx.orchestration.get(ref)
        session = await tx.sessions.get(ref)
    assert marker is not None and orchestration is not None and session is not None
    feed = await read_events(store, ref.namespace)
    return {
        "records": records,
        "usage": orchestration.cumulative_token_usage,
        "idle clock": (session.last_accessed, session.ttl_seconds),
        "marker": (marker.value, marker.revision, marker.created_at, marker.updated_at),
        "events": [
            (e.seq, e.kind, e.agent_id, e.session_id, e.turn_id, e.detail, e.created_at)
            for e in feed
        ],
    }


async def test_finishing_a_turn_writes_what_its_three_steps_write(
    store: StateStore, make_ref: Callable[..., SessionRef]
) -> None:
    together, apart = make_ref(namespace=f"{make_ref().namespace}a"), make_ref()
    for turn in (1, 2, 3):
        await _finish(store, together, turn)
        await _finish(store, apart, turn, steps=True)
    written = await _written(store, together, 3)
    assert written == await _written(store, apart, 3)
    assert written["marker"][:2] == ({"turn": 3}, 3)
    assert [e[:2] for e in written["events"]] == [
        (n, kind) for n, kind in enumerate(["messages", "kv"] * 3, start=1)
    ]
    assert written["records"] == [{"turn": n, "reply": f"stored {n}"} for n in (1, 2, 3)]
    # The first usage created the session's orchestration row; turn 2 had none to count.
    assert written["usage"] == TokenUsage(prompt_tokens=400, completion_tokens=4)


async def test_a_second_record_of_a_turn_is_refused_and_its_transaction_leaves_nothing(
    store: StateStore, ref: SessionRef
) -> None:
    await _finish(store, ref, 1)
    before = await _written(store, ref, 1)
    with pytest.raises(RevisionConflictError):
        async with store.transaction() as tx:
            await tx.finish_turn(
                ref,
                "t1",
                {"turn": 1, "reply": "a second attempt"},
                (MARKER_BUCKET, "latest", {"turn": 99}),
                _events(ref, 99),
                _usage(99),
            )
    assert await _written(store, ref, 1) == before
    # The refused attempt took no numbers: the next events follow on.
    await _finish(store, ref, 2)
    assert [e[0] for e in (await _written(store, ref, 2))["events"]] == [1, 2, 3, 4]


async def test_a_turn_without_events_takes_no_number(
    store: StateStore, make_ref: Callable[..., SessionRef]
) -> None:
    first, quiet = make_ref("s1"), make_ref("s2")
    await _finish(store, quiet, 1, events=False)  # before the namespace has any event
    await _finish(store, first, 1)
    await _finish(store, quiet, 2, events=False)
    await _finish(store, first, 2)
    assert [e[0] for e in (await _written(store, first, 2))["events"]] == [1, 2, 3, 4]
    assert (await _written(store, quiet, 2))["marker"][:2] == ({"turn": 2}, 2)


async def test_postgresql_sends_the_four_writes_as_one_statement(
    store: StateStore, make_ref: Callable[..., SessionRef]
) -> None:
    if store.dialect != "postgresql":
        pytest.skip("the writes are one statement on PostgreSQL only")
    ref = make_ref()
    # The namespace's numbering row and the session's orchestration row now exist.
    await _finish(store, ref, 1)
    sent: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(" ".join(statement.split()))

    # Listening sends every statement through SQLAlchemy (see direct): the same statements.
    engine = store.engine.sync_engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", seen)
    try:
        async with store.transaction() as tx:
            await tx.sessions.ensure(ref)  # the header's lock, which a commit takes first
            sent.clear()
            await tx.finish_turn(
                ref,
                "t2",
                {"turn": 2},
                (MARKER_BUCKET, "latest", {"turn": 2}),
                _events(ref, 2),
                _usage(3),
            )
            closing = list(sent)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(closing) == 1 and closing[0].startswith("WITH"), closing
    written = await _written(store, ref, 2)
    assert [e[0] for e in written["events"]] == [1, 2, 3, 4]
    assert written["usage"] == TokenUsage(prompt_tokens=400, completion_tokens=4)


BAD_FINISHES = {
    "turn id": {"turn_id": "not an id!"},
    "record": {"record": {"not json": object()}},
    "marker key": {"marker": (MARKER_BUCKET, "no spaces allowed", {"turn": 9})},
    "usage": {"usage": TokenUsage.model_construct(prompt_tokens=-5, completion_tokens=1)},
}


@pytest.mark.parametrize("bad", sorted(BAD_FINISHES))
async def test_bad_input_fails_typed_and_leaves_everything_as_it_was(
    store: StateStore, ref: SessionRef, bad: str
) -> None:
    await _finish(store, ref, 1)
    before = await _written(store, ref, 1)
    arguments: dict[str, Any] = {
        "turn_id": "t2",
        "record": {"turn": 2},
        "marker": (MARKER_BUCKET, "latest", {"turn": 2}),
        "events": _events(ref, 2),
        "usage": _usage(3),
        **BAD_FINISHES[bad],
    }
    with pytest.raises(StatecoreError):
        async with store.transaction() as tx:
            await tx.sessions.ensure(ref)
            await tx.finish_turn(ref, **arguments)
    assert await _written(store, ref, 1) == before
    await _finish(store, ref, 2)  # the session takes the next turn as usual
    assert [e[0] for e in (await _written(store, ref, 2))["events"]] == [1, 2, 3, 4]
