"""A session no worker serves is named within seconds, not after the whole ``--timeout``.

``describe``, ``reset`` and ``compact`` are answered by the session's workflow, so by a
worker polling its task queue. When no answer came within NO_WORKER_CHECK_SECONDS, Temporal
is asked whether any worker polls that queue (statecore.temporal._pollers); with none, the
command ends with exit code 5, naming the queue and the way to read the state without a
worker. With one, the command keeps waiting for its answer as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from temporalio.service import RPCError

from statecore.cli._exits import UnreachableError
from statecore.core._errors import StatecoreError
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._pollers import session_task_queue, workers_polling

T = TypeVar("T")

#: How long a command waits for the session's answer before it asks whether any worker
#: polls the session's task queue.
NO_WORKER_CHECK_SECONDS = 2.0
#: How Temporal words a query or update that no worker took in time.
NO_POLLER_WORDS = "no poller seen"


async def answer_or_no_worker(
    sessions: AgentSessionClient, agent: str, session: str, work: Awaitable[T]
) -> T:
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=NO_WORKER_CHECK_SECONDS)
        if not done:
            queue = await _queue_without_worker(sessions, agent, session)
            if queue is not None:
                raise UnreachableError(_no_worker_message(queue, agent, session))
        try:
            return await task
        except StatecoreError as exc:
            if NO_POLLER_WORDS not in exc.message:
                raise
            queue = await _queue_without_worker(sessions, agent, session, live=False)
            raise UnreachableError(_no_worker_message(queue or "?", agent, session)) from exc
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _no_worker_message(queue: str, agent: str, session: str) -> str:
    return (
        f"no worker polls task queue {queue!r}, where session {agent}/{session} runs: "
        f"start one (statecore worker --task-queue {queue}), or read the stored state "
        "without a worker: statecore describe --db"
    )


async def _queue_without_worker(
    sessions: AgentSessionClient, agent: str, session: str, *, live: bool = True
) -> str | None:
    """The session's task queue if no worker polls it (or, ``live`` False, whatever the
    pollers); None if one does, or if Temporal cannot say (the command's own answer, or its
    timeout, then decides)."""
    try:
        client = sessions.client
        queue = await session_task_queue(client, sessions.workflow_id(agent, session))
        if live and await workers_polling(client, queue):
            return None
    except RPCError:
        return None
    return queue
