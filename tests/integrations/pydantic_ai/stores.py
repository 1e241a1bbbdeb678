"""The conversation stores the contract suite runs against: Pydantic AI's own
``InMemoryConversationStore`` (the reference) and ``StatecoreConversationStore`` on memory,
SQLite, PostgreSQL and MariaDB (one migrated database per module, one namespace per test)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from pydantic_ai.conversation_store import ConversationStore, InMemoryConversationStore

from statecore.integrations.pydantic_ai import StatecoreConversationStore
from statecore.store._migrate import upgrade_database
from tests.dbs import create_database, drop_database

STORES = [
    pytest.param("reference", id="reference"),
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mariadb", id="mariadb", marks=pytest.mark.mariadb),
]
SQL_STORES = [p for p in STORES if p.values[0] not in ("reference", "memory")]
_DIALECT = {"postgres": "postgresql", "mariadb": "mysql"}


@pytest.fixture(scope="module", params=STORES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
async def database_url(
    kind: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str | None]:
    if kind in ("reference", "memory"):
        yield None
        return
    if kind == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('pai') / 'state.db'}"
        await upgrade_database(url)
        yield url
        return
    url = await create_database(_DIALECT[kind], "pai")
    try:
        await upgrade_database(url)
        yield url
    finally:
        await drop_database(url)


def open_store(kind: str, database_url: str | None, namespace: str) -> ConversationStore:
    if kind == "reference":
        return InMemoryConversationStore()
    return StatecoreConversationStore(database_url=database_url or "memory://", namespace=namespace)


@pytest.fixture
async def conversations(kind: str, database_url: str | None) -> AsyncIterator[ConversationStore]:
    store = open_store(kind, database_url, f"t{uuid.uuid4().hex[:12]}")
    try:
        yield store
    finally:
        if isinstance(store, StatecoreConversationStore):
            await store.close()
