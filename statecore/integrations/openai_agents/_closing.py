"""Closing a ``StatecoreSession``'s stores from sync and async code alike.

The SDK's ``SQLiteSession.close()`` is a plain method, so code written for it calls
``session.close()`` without ``await`` (the SDK's encrypted-session example does, inside
``async def main``). Async code written for statecore writes ``await session.close()``. Both
must close the session, and neither may leave a coroutine that was never awaited.

A SQL store's connections belong to the event loop that opened them, so each store is closed
where it can be:

- on the loop running now: by a task started at once. ``close()`` returns it, so awaiting
  waits for it; code that does not await still gets the close, because the task runs anyway.
  The task ignores cancellation (its own time limit bounds it): ``asyncio.run`` cancels every
  task left when ``main`` returns, and a close cut off half way leaves a connection (and
  aiosqlite's thread for it) open;
- on a loop that is still running in another thread: on that loop, from here;
- on a loop that has stopped but is not closed (the thread's default loop, which the SDK's
  ``run_sync`` uses): on that loop, run again for the purpose, synchronously when no loop runs
  in this thread, in a worker thread (part of the returned awaitable) when one does;
- on a loop that is closed (``asyncio.run`` returned): on a private loop of its own, the
  same way. aiosqlite's connections close there as on their own loop; asyncpg's cannot be
  closed gracefully from another loop, so SQLAlchemy logs the failed close and the
  connection is terminated instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from statecore.store import StateStore

logger = logging.getLogger(__name__)

#: How long closing one store may take before it is given up (and logged): disposing a pool
#: closes each idle connection, which takes milliseconds unless the database is unreachable.
CLOSE_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class OpenedStore:
    """A store a session opened, and the loop it was opened on."""

    store: StateStore
    loop: asyncio.AbstractEventLoop


class Closing:
    """What ``StatecoreSession.close()`` returns: the close is under way (or already done)
    when it is returned; awaiting it waits until every store is closed and raises what
    closing raised. Not awaiting it is fine: nothing is left waiting to be awaited."""

    def __init__(self, task: asyncio.Future[None] | None) -> None:
        self._task = task

    @property
    def done(self) -> bool:
        return self._task is None or self._task.done()

    def __await__(self) -> Generator[Any, None, None]:
        if self._task is not None:
            yield from self._task.__await__()


def close_stores(opened: list[OpenedStore]) -> Closing:
    """Close every store in ``opened`` on the loop it belongs to (see the module docstring)."""
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    here: list[StateStore] = []
    elsewhere: list[Future[None]] = []
    stopped: list[OpenedStore] = []
    for entry in opened:
        if entry.loop is running:
            here.append(entry.store)
        elif entry.loop.is_running() and not entry.loop.is_closed():
            elsewhere.append(
                asyncio.run_coroutine_threadsafe(_close_in_time(entry.store), entry.loop)
            )
        else:
            stopped.append(entry)
    if running is None:
        # No loop here: everything happens now, before close() returns, as the SDK's
        # sessions do.
        for entry in stopped:
            _close_on_stopped_loop(entry)
        for future in elsewhere:
            future.result(timeout=CLOSE_TIMEOUT_SECONDS + 1)
        return Closing(None)
    if not (here or elsewhere or stopped):
        return Closing(None)
    task = _CloseTask(_close_all(here, elsewhere, stopped), loop=running)
    # A caller that never awaits never sees the outcome; log it rather than lose it.
    task.add_done_callback(_log_failure)
    return Closing(task)


async def _close_all(
    here: list[StateStore], elsewhere: list[Future[None]], stopped: list[OpenedStore]
) -> None:
    for store in here:
        await _close_in_time(store)
    for entry in stopped:
        await asyncio.to_thread(_close_on_stopped_loop, entry)
    for future in elsewhere:
        await asyncio.wrap_future(future)


class _CloseTask(asyncio.Task[None]):
    """A task that finishes what it started: cancelling it does nothing (see the module
    docstring); it ends within its own time limit instead."""

    def cancel(self, msg: Any = None) -> bool:
        return False


async def _close_in_time(store: StateStore) -> None:
    # asyncio.timeout, not wait_for: wait_for would run the close as a task of its own, which
    # asyncio.run's clean-up would cancel.
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT_SECONDS):
            await store.close()
    except TimeoutError as exc:
        raise TimeoutError(
            f"closing a statecore store took over {CLOSE_TIMEOUT_SECONDS:g} s "
            "(disposing its connection pool); the database may be unreachable"
        ) from exc


def _close_on_stopped_loop(entry: OpenedStore) -> None:
    """Close the store on its own loop if that loop can still run, else on a private one."""
    if not entry.loop.is_closed():
        entry.loop.run_until_complete(_close_in_time(entry.store))
        return
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_close_in_time(entry.store))
    finally:
        loop.close()


def _log_failure(task: asyncio.Future[None]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        logger.warning("closing a StatecoreSession's store failed: %s", error)
