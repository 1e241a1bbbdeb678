"""Calling StatecoreSaver's coroutines from synchronous code.

The saver's connections belong to one event loop. LangGraph calls a saver's sync methods
from the threads of ``graph.invoke``/``graph.stream``; they run the coroutine on the saver's
loop and wait for it, with a time limit. Called on that loop's own thread they would wait
for themselves forever, so they refuse at once, as LangGraph's async savers do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from statecore.core._errors import StatecoreError

T = TypeVar("T")

#: How long a sync call waits for its coroutine by default.
DEFAULT_SYNC_TIMEOUT_SECONDS = 300.0
#: How long starting or stopping the private loop thread may take.
LOOP_THREAD_START_SECONDS = 10.0


def call_on_loop(
    loop: asyncio.AbstractEventLoop,
    make: Callable[[], Coroutine[Any, Any, T]],
    *,
    timeout: float,
    what: str,
) -> T:
    """Run ``make()`` on ``loop`` from another thread and return its result."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise asyncio.InvalidStateError(
            f"StatecoreSaver.{what}() was called on the event loop the saver runs on, where "
            f"waiting for it would block that loop forever; use `await saver.a{what}(...)` "
            "(or `await graph.ainvoke(...)`) there, or call the sync method from another thread"
        )
    if loop.is_closed() or not loop.is_running():
        raise StatecoreError(
            f"StatecoreSaver.{what}(): the event loop this saver was opened on is not running "
            "any more; open the saver with `with StatecoreSaver.from_conn_string(url)` for "
            "synchronous use"
        )
    future = asyncio.run_coroutine_threadsafe(make(), loop)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(
            f"StatecoreSaver.{what}() waited {timeout:g} s for the database and gave up; "
            "the saver's event loop may be blocked, or the database unreachable"
        ) from None


class LoopThread:
    """A private event loop on a daemon thread, for a saver used only synchronously."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="statecore-langgraph-saver", daemon=True
        )

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        self.loop.run_forever()

    def start(self) -> None:
        self._thread.start()
        if not self._started.wait(LOOP_THREAD_START_SECONDS):
            raise StatecoreError(
                "the saver's event loop thread did not start within "
                f"{LOOP_THREAD_START_SECONDS:g} s"
            )

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(LOOP_THREAD_START_SECONDS)
        if not self._thread.is_alive():
            self.loop.close()
