"""The session services the contract suite runs against: ADK's own and statecore's.

Each kind opens a service and a second, independent instance on the same storage (for ADK's
in-memory service, which has no storage of its own, the same object): what a second process
would see.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.adk.sessions import BaseSessionService, DatabaseSessionService, InMemorySessionService

from statecore.integrations.google_adk import StatecoreSessionService
from statecore.store.memory import MemoryStateStore
from tests.dbs import fresh_database

ADK_KINDS = ["adk-memory", "adk-database"]
STATECORE_KINDS = [
    "statecore-memory",
    "statecore-sqlite",
    "statecore-postgres",
    "statecore-mariadb",
]

KIND_PARAMS = [
    pytest.param("adk-memory", id="adk-memory"),
    pytest.param("adk-database", id="adk-database"),
    pytest.param("statecore-memory", id="statecore-memory"),
    pytest.param("statecore-sqlite", id="statecore-sqlite"),
    pytest.param("statecore-postgres", id="statecore-postgres", marks=pytest.mark.postgres),
    pytest.param("statecore-mariadb", id="statecore-mariadb", marks=pytest.mark.mariadb),
]


@dataclass
class Services:
    kind: str
    service: BaseSessionService
    #: Another instance on the same storage (ADK's in-memory service: the same object).
    other: BaseSessionService
    #: The app the current case works in: each case has its own, so cases share a database.
    app: str = "contract_app"

    @property
    def shares_storage(self) -> bool:
        return self.other is not self.service


@asynccontextmanager
async def open_services(kind: str, directory: Path) -> AsyncIterator[Services]:
    if kind == "adk-memory":
        service = InMemorySessionService()
        yield Services(kind, service, service)
        return
    if kind == "adk-database":
        url = f"sqlite+aiosqlite:///{directory / 'adk.db'}"
        first, second = DatabaseSessionService(url), DatabaseSessionService(url)
        try:
            yield Services(kind, first, second)
        finally:
            await first.close()
            await second.close()
        return
    if kind == "statecore-memory":
        store = MemoryStateStore()
        try:
            yield Services(
                kind, StatecoreSessionService(store=store), StatecoreSessionService(store=store)
            )
        finally:
            await store.close()
        return
    if kind == "statecore-sqlite":
        async with _statecore(kind, f"sqlite+aiosqlite:///{directory / 'statecore.db'}") as s:
            yield s
        return
    dialect = {"statecore-postgres": "postgresql", "statecore-mariadb": "mysql"}[kind]
    async with fresh_database(dialect, "adk") as url, _statecore(kind, url) as services:
        yield services


@asynccontextmanager
async def _statecore(kind: str, url: str) -> AsyncIterator[Services]:
    first = StatecoreSessionService(database_url=url)
    second = StatecoreSessionService(database_url=url)
    try:
        yield Services(kind, first, second)
    finally:
        await first.close()
        await second.close()
