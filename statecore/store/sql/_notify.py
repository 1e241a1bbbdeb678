"""PostgreSQL pushes new events: LISTEN on the feed's channel, woken by the commit's NOTIFY.

One pooled connection per follower is held for the listener (asyncpg's ``add_listener``);
no query runs while waiting. A follower still reads again after at most its ``max_wait``,
which covers a listener connection the server or a proxy dropped without a word.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from statecore.store._signals import WakeSignal
from statecore.store.sql._events import NOTIFY_CHANNEL


class _Notified(WakeSignal):
    def __init__(self) -> None:
        self.woken = asyncio.Event()

    def arm(self) -> None:
        self.woken.clear()

    async def wait(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self.woken.wait(), seconds)
        except TimeoutError:
            return False
        return True


@asynccontextmanager
async def listen_for_events(engine: AsyncEngine, namespace: str) -> AsyncIterator[WakeSignal]:
    signal = _Notified()

    def on_notify(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload == namespace:
            signal.woken.set()

    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        listener = raw.driver_connection
        assert listener is not None
        await listener.add_listener(NOTIFY_CHANNEL, on_notify)
        try:
            yield signal
        finally:
            await listener.remove_listener(NOTIFY_CHANNEL, on_notify)
