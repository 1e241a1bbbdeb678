"""``StatecoreSaver.from_conn_string``: one object for ``async with`` and for ``with``.

LangGraph ships an async and a sync class per database (``AsyncSqliteSaver`` and
``SqliteSaver``); statecore has one saver, opened either way. Async, the engine lives on the
caller's event loop. Sync, it lives on a private loop thread that the sync methods call into,
so a graph run with ``graph.invoke`` needs no event loop of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from statecore.integrations.langgraph._loop_bridge import LoopThread, call_on_loop
from statecore.store import normalize_database_url
from statecore.store.sql._engine import create_store_engine

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

#: How long the sync form waits to open or close its engine.
OPEN_TIMEOUT_SECONDS = 60.0

#: The saver an opener makes: ``StatecoreSaver`` or a subclass of it.
Saver = TypeVar("Saver")


class SaverOpener(Generic[Saver]):
    """Returned by ``StatecoreSaver.from_conn_string``; enter it to get the saver.

    ``saver_class`` is called with the engine and the options (and, in the sync form,
    ``loop=``): the opener knows only how to own the engine, not the saver it hands out."""

    def __init__(
        self, saver_class: Callable[..., Saver], database_url: str, options: dict[str, Any]
    ) -> None:
        self._saver_class = saver_class
        self._url = normalize_database_url(database_url)
        self._options = options
        self._engine: AsyncEngine | None = None
        self._thread: LoopThread | None = None

    async def __aenter__(self) -> Saver:
        self._engine = create_store_engine(self._url)
        return self._saver_class(self._engine, **self._options)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    def __enter__(self) -> Saver:
        thread = LoopThread()
        thread.start()
        self._thread = thread

        async def open_saver() -> Saver:
            self._engine = create_store_engine(self._url)
            return self._saver_class(self._engine, loop=thread.loop, **self._options)

        try:
            return call_on_loop(thread.loop, open_saver, timeout=OPEN_TIMEOUT_SECONDS, what="open")
        except BaseException:
            thread.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            if self._engine is not None:
                engine = self._engine

                async def dispose() -> None:
                    await engine.dispose()

                call_on_loop(thread.loop, dispose, timeout=OPEN_TIMEOUT_SECONDS, what="close")
                self._engine = None
        finally:
            thread.stop()
