"""One worker for the whole catalog module: the shared dev server, a fresh SQLite database,
AgentSession plus CatalogAgent (a user's workflow on the turn API) on a fresh task queue."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import DevServer
from statecore.temporal._plugin import StatecorePlugin
from tests.catalog.turn_api_workflow import CatalogAgent
from tests.dbs import fresh_database
from tests.temporal.conftest import dev_server, temporal_cli

__all__ = ["CatalogEnv", "catalog_env", "dev_server"]


@dataclass
class CatalogEnv:
    client: Client
    sessions: AgentSessionClient
    task_queue: str
    database_url: str
    #: The real `temporal` CLI, pointed at the dev server.
    temporal: list[str]
    #: Workflow ids are global on the shared dev server: every session of this module uses it.
    agent: str


@pytest.fixture(scope="module")
async def catalog_env(dev_server: DevServer) -> AsyncIterator[CatalogEnv]:
    queue = f"catalog-{uuid.uuid4().hex[:10]}"
    async with fresh_database("sqlite", "catalog") as url:
        plugin = StatecorePlugin(url, extra_workflows=[CatalogAgent])
        client = await Client.connect(dev_server.address, plugins=[plugin])
        async with Worker(client, task_queue=queue):
            yield CatalogEnv(
                client=client,
                sessions=AgentSessionClient(client, task_queue=queue),
                task_queue=queue,
                database_url=url,
                temporal=temporal_cli(dev_server),
                agent=f"catalog-{uuid.uuid4().hex[:8]}",
            )
