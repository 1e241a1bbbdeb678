"""Stream rows of running turns, in memory: the reference for the SQL backends.

Rows live beside the committed data, outside transactions (as in SQL, each call stands on its
own). A row whose session is gone reads as absent; a write to a missing session is refused.
Readers are woken at once by every write and removal, as PostgreSQL's NOTIFY wakes them,
and read again every poll interval besides.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from statecore.core._identifiers import validate_turn_id
from statecore.core._models import SessionRef, ToolCall
from statecore.store._inputs import check_ref
from statecore.store._signals import WakeSignal
from statecore.store._turn_streams import (
    TurnStreamSnapshot,
    TurnStreamStore,
    check_stream_write,
)

_Key = tuple[str, str, str, str]


class _Woken(WakeSignal):
    """Woken by a write or removal of the row; a commit (which does not touch the row when
    nothing was streamed) is seen at the next read, at most ``interval`` later."""

    def __init__(self, interval: float) -> None:
        self.woken = asyncio.Event()
        self._interval = interval

    def arm(self) -> None:
        self.woken.clear()

    async def wait(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self.woken.wait(), min(seconds, self._interval))
        except TimeoutError:
            return False
        return True


class MemoryTurnStreams(TurnStreamStore):
    def __init__(self, session_exists: Callable[[SessionRef], bool]) -> None:
        self._rows: dict[_Key, TurnStreamSnapshot] = {}
        self._session_exists = session_exists
        self._readers: dict[_Key, set[_Woken]] = {}

    @staticmethod
    def _key(ref: SessionRef, turn_id: str) -> _Key:
        check_ref(ref)
        validate_turn_id(turn_id)
        return (ref.namespace, ref.agent_id, ref.session_id, turn_id)

    def _wake(self, key: _Key) -> None:
        for signal in self._readers.get(key, ()):
            signal.woken.set()

    async def write(
        self,
        ref: SessionRef,
        turn_id: str,
        attempt: int,
        text: str,
        tool_calls: Sequence[ToolCall] = (),
    ) -> bool:
        text, calls, full = check_stream_write(ref, turn_id, attempt, text, tool_calls)
        key = self._key(ref, turn_id)
        if not self._session_exists(ref):
            return False
        held = self._rows.get(key)
        if held is not None and held.attempt > attempt:
            return False
        self._rows[key] = TurnStreamSnapshot(attempt, text, calls, full)
        self._wake(key)
        return True

    async def read(self, ref: SessionRef, turn_id: str) -> TurnStreamSnapshot | None:
        key = self._key(ref, turn_id)
        if not self._session_exists(ref):
            self._rows.pop(key, None)
            return None
        return self._rows.get(key)

    async def remove(self, ref: SessionRef, turn_id: str) -> bool:
        key = self._key(ref, turn_id)
        found = self._rows.pop(key, None) is not None
        self._wake(key)
        return found

    async def count(self, ref: SessionRef) -> int:
        check_ref(ref)
        prefix = (ref.namespace, ref.agent_id, ref.session_id)
        return sum(1 for key in self._rows if key[:3] == prefix)

    def changes(
        self, ref: SessionRef, turn_id: str, *, poll_interval: float
    ) -> AbstractAsyncContextManager[WakeSignal]:
        return self._listen(self._key(ref, turn_id), poll_interval)

    @asynccontextmanager
    async def _listen(self, key: _Key, poll_interval: float) -> AsyncIterator[WakeSignal]:
        signal = _Woken(poll_interval)
        self._readers.setdefault(key, set()).add(signal)
        try:
            yield signal
        finally:
            readers = self._readers.get(key)
            if readers is not None:
                readers.discard(signal)
                if not readers:
                    del self._readers[key]
