"""LangGraph users set a saver up with ``await checkpointer.setup()`` (async savers) or
``checkpointer.setup()`` (sync savers); StatecoreSaver takes both, on a fresh database, and
a graph runs on what they created."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import inspect

from statecore.integrations.langgraph import StatecoreSaver
from tests.dbs import fresh_database
from tests.integrations.langgraph_chat import build_chat, user_message

DIALECTS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
]
CONFIG = {"configurable": {"thread_id": "setup"}}


@pytest.fixture(params=DIALECTS)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh database with no statecore tables in it."""
    async with fresh_database(request.param, "lgsetup") as url:
        yield url


async def statecore_tables(saver: StatecoreSaver) -> list[str]:
    async with saver.engine.connect() as conn:
        names = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
    return sorted(n for n in names if n.startswith("statecore_"))


async def test_await_setup_in_async_code(url: str) -> None:
    async with StatecoreSaver.from_conn_string(url) as saver:
        assert await statecore_tables(saver) == []
        await saver.setup()
        assert "statecore_graph_checkpoints" in await statecore_tables(saver)
        await saver.setup()  # again: the schema is already current
        result = await build_chat("default", saver).ainvoke(user_message(1), CONFIG)
        assert len(result["messages"]) == 2


async def test_setup_not_awaited_in_async_code_still_sets_up(url: str) -> None:
    async with StatecoreSaver.from_conn_string(url) as saver:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call = saver.setup()
            for _ in range(600):
                if call.done:
                    break
                await asyncio.sleep(0.05)
            gc.collect()
        assert call.done
        assert not [w for w in caught if "never awaited" in str(w.message)], caught
        assert "statecore_graph_checkpoints" in await statecore_tables(saver)


async def test_sync_setup_from_a_worker_thread_of_async_code(url: str) -> None:
    async with StatecoreSaver.from_conn_string(url) as saver:
        call = await asyncio.to_thread(saver.setup)
        assert call.done  # done before it returned, as a sync saver's setup is
        await call
        result = await asyncio.to_thread(
            build_chat("default", saver).invoke, user_message(1), CONFIG
        )
        assert len(result["messages"]) == 2


def test_setup_in_sync_code(url: str) -> None:
    with StatecoreSaver.from_conn_string(url) as saver:
        assert saver.setup().done
        result = build_chat("default", saver).invoke(user_message(1), CONFIG)
        assert len(result["messages"]) == 2
        assert saver.get_tuple(CONFIG) is not None


async def test_await_setup_on_a_sync_saver_from_async_code(url: str) -> None:
    """The sync form entered with ``with`` inside async code: its loop is its own thread's,
    so ``setup()`` finishes before returning and ``await`` on it returns at once."""
    with StatecoreSaver.from_conn_string(url) as saver:
        await saver.setup()
        assert "statecore_graph_checkpoints" in await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(statecore_tables(saver), saver.loop)
        )
