"""The writer that publishes a model call's reply, as it is generated, to the turn's stream row.

The model hands its deltas to ``add_text``/``add_call``, which only append to a buffer: the
model never waits on the database. A task beside the call writes the buffer's whole text to
the row (``statecore.store._turn_streams``): the first delta at once, later ones at most every
``flush_seconds``, coalescing whatever arrived meanwhile. A retried attempt writes its
(empty) row first, so readers learn at once that the turn restarted.

A write that fails or takes longer than ``STREAM_WRITE_TIMEOUT_SECONDS`` ends the streaming of
this attempt, never the turn: readers then take the reply from the turn's commit. The caller
stops the writer before the turn commits and removes the row after (``finish``).
"""

from __future__ import annotations

import asyncio
import logging

from statecore.core._limits import (
    MAX_STREAM_TEXT_CHARS,
    MAX_STREAM_TOOL_CALLS,
    STREAM_WRITE_TIMEOUT_SECONDS,
)
from statecore.core._models import SessionRef, ToolCall
from statecore.store._turn_streams import TurnStreamStore

log = logging.getLogger("statecore.turns")


class StreamWriter:
    def __init__(
        self,
        streams: TurnStreamStore,
        ref: SessionRef,
        turn_id: str,
        attempt: int,
        flush_seconds: float,
    ) -> None:
        self._streams = streams
        self._ref = ref
        self._turn_id = turn_id
        self._attempt = attempt
        self._flush_seconds = flush_seconds
        self._parts: list[str] = []
        self._chars = 0
        self._calls: list[ToolCall] = []
        self._dirty = asyncio.Event()
        self._closing = False
        self._writing = False
        self._task: asyncio.Task[None] | None = None
        #: A write was started: the row may hold this attempt's output.
        self.touched = False
        #: Writes that reached the database (tests and benchmarks).
        self.writes = 0

    def start(self) -> None:
        if self._attempt > 1:
            self._dirty.set()  # a retry announces itself before its first token
        self._task = asyncio.get_running_loop().create_task(self._run())

    def add_text(self, text: str) -> None:
        if not text or self._chars >= MAX_STREAM_TEXT_CHARS:
            return  # past the row's bound the rest comes with the commit
        self._parts.append(text)
        self._chars += len(text)
        self._dirty.set()

    def add_call(self, call: ToolCall) -> None:
        if len(self._calls) < MAX_STREAM_TOOL_CALLS:
            self._calls.append(call)
            self._dirty.set()

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            if self._closing:
                return
            self._dirty.clear()
            text = "".join(self._parts)
            self._parts = [text]
            self.touched = True
            self._writing = True
            try:
                async with asyncio.timeout(STREAM_WRITE_TIMEOUT_SECONDS):
                    kept = await self._streams.write(
                        self._ref, self._turn_id, self._attempt, text, list(self._calls)
                    )
            except Exception as exc:  # the turn goes on; its commit carries the reply
                log.warning(
                    "turn %s: streaming stopped for attempt %d (%s: %s); readers get the "
                    "reply when the turn commits",
                    self._turn_id,
                    self._attempt,
                    type(exc).__name__,
                    exc,
                )
                return
            finally:
                self._writing = False
            self.writes += 1
            if not kept:
                return  # a newer attempt holds the row (or the session is gone)
            if self._closing:
                return
            await asyncio.sleep(self._flush_seconds)

    async def stop(self) -> None:
        """Stop writing: a write under way finishes (within its timeout), none starts."""
        self._closing = True
        task = self._task
        if task is None:
            return
        if not self._writing:
            task.cancel()
        self._dirty.set()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise

    async def finish(self) -> None:
        """Remove the row once the turn has committed (or failed for good). Only when this
        attempt may have written one, or an earlier attempt may have: a first attempt that
        wrote nothing (a model that answers at once) costs no statement."""
        if not (self.touched or self._attempt > 1):
            return
        try:
            async with asyncio.timeout(STREAM_WRITE_TIMEOUT_SECONDS):
                await self._streams.remove(self._ref, self._turn_id)
        except Exception as exc:  # readers prefer the committed turn to a leftover row
            log.warning(
                "turn %s: its stream row was not removed (%s: %s); it goes with the session",
                self._turn_id,
                type(exc).__name__,
                exc,
            )
