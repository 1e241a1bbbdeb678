"""Following a namespace's change feed: ``async for event in follow_events(store, ns)``.

The reader's guarantee: events arrive in ``seq`` order, each once, and none that committed
is ever skipped (numbers are given in commit order, see ``statecore.store.sql._events``).
Start from ``after=0`` for the whole retained feed, or from the last ``seq`` you handled to
resume. Events older than a sweep are gone: compare the first ``seq`` you get with what you
expected when that matters.

Between reads the follower waits on the store's signal: PostgreSQL wakes it with the commit's
NOTIFY, other backends re-read every ``poll_interval`` seconds. Every wait is bounded (at most
``max_wait``) and cancellable; ``idle_timeout`` ends the iteration after that long without a
new event (None: follow until cancelled).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from statecore.core._change_events import ChangeEvent
from statecore.core._errors import InvalidLimitError
from statecore.core._models import validate_identifier
from statecore.store._base import StateStore, StoreTransaction
from statecore.store._inputs import check_int
from statecore.store._retry import run_transaction

DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_MAX_WAIT = 30.0
BATCH = 500


def _positive(value: float | None, what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        raise InvalidLimitError(f"{what} must be a positive number of seconds, got {value!r}")


async def read_events(
    store: StateStore, namespace: str, *, after: int = 0, limit: int = BATCH
) -> list[ChangeEvent]:
    """One page of the feed (no waiting)."""

    async def read(tx: StoreTransaction) -> list[ChangeEvent]:
        return await tx.events.read(namespace, after=after, limit=limit)

    return await run_transaction(store, read, read_only=True)


async def follow_events(
    store: StateStore,
    namespace: str,
    *,
    after: int = 0,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    max_wait: float = DEFAULT_MAX_WAIT,
    idle_timeout: float | None = None,
) -> AsyncIterator[ChangeEvent]:
    """Every event of ``namespace`` after ``after``, then new ones as they commit."""
    validate_identifier(namespace, "namespace")
    check_int(after, "after", minimum=0)
    _positive(poll_interval, "poll_interval")
    _positive(max_wait, "max_wait")
    _positive(idle_timeout, "idle_timeout")
    async with store.new_events_signal(namespace, poll_interval=poll_interval) as signal:
        last_event = time.monotonic()
        while True:
            signal.arm()
            page = await read_events(store, namespace, after=after)
            for event in page:
                yield event
                after = event.seq
            if page:
                last_event = time.monotonic()
                if len(page) == BATCH:
                    continue
            wait = max_wait
            if idle_timeout is not None:
                left = idle_timeout - (time.monotonic() - last_event)
                if left <= 0:
                    return
                wait = min(wait, left)
            await signal.wait(wait)
