"""``StatecoreSaver.setup()`` in the form each kind of LangGraph code writes it.

LangGraph's sync savers are set up with ``checkpointer.setup()``, its async savers with
``await checkpointer.setup()``. statecore has one saver for both, so ``setup()`` does the work
where it can and returns something ``await`` accepts either way:

- called from a thread other than the saver's loop (sync code, a worker thread, another
  loop): the schema is brought up to date before ``setup()`` returns, as a sync saver's is,
  and the returned object is already done;
- called on the saver's own loop (``await saver.setup()`` in async code): waiting there would
  block the loop it needs, so the work starts as a task on that loop and ``await`` waits for
  it. Not awaiting it still sets the schema up; a failure is then logged, since no caller
  can see it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from statecore.integrations.langgraph._loop_bridge import call_on_loop

logger = logging.getLogger(__name__)


class SetupCall:
    """What ``StatecoreSaver.setup()`` returns; awaiting it waits for the setup (and raises
    what it raised)."""

    def __init__(self, task: asyncio.Future[None] | None) -> None:
        self._task = task

    @property
    def done(self) -> bool:
        return self._task is None or self._task.done()

    def __await__(self) -> Generator[Any, None, None]:
        if self._task is not None:
            yield from self._task.__await__()


def run_setup(
    loop: asyncio.AbstractEventLoop,
    make: Callable[[], Coroutine[Any, Any, None]],
    *,
    timeout: float,
) -> SetupCall:
    """Run the saver's ``asetup`` as described in the module docstring."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not loop:
        call_on_loop(loop, make, timeout=timeout, what="setup")
        return SetupCall(None)
    task = loop.create_task(make())
    task.add_done_callback(_log_failure)
    return SetupCall(task)


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("StatecoreSaver.setup() failed: %s", task.exception())
