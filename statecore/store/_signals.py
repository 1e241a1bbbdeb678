"""What a reader waits on between two reads: the change feed's reader and a turn stream's.

A backend that can push (PostgreSQL's LISTEN, the memory backend's in-process notice) wakes
the reader when something may have changed; every other backend polls, and ``polling``
is that wait.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class WakeSignal(abc.ABC):
    """Wakes a reader when what it reads may have changed."""

    @abc.abstractmethod
    def arm(self) -> None:
        """Forget earlier wake-ups: call just before reading, so a change that lands after
        the read still wakes the next ``wait``."""

    @abc.abstractmethod
    async def wait(self, seconds: float) -> bool:
        """Wait at most ``seconds``; True when woken by a change."""


class _Polling(WakeSignal):
    def __init__(self, interval: float) -> None:
        self._interval = interval

    def arm(self) -> None:
        pass

    async def wait(self, seconds: float) -> bool:
        await asyncio.sleep(min(self._interval, seconds))
        return False


@asynccontextmanager
async def polling(interval: float) -> AsyncIterator[WakeSignal]:
    """A signal that never wakes early: the reader reads again every ``interval`` seconds."""
    yield _Polling(interval)
