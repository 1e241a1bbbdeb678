"""A migrated database per backend for the LangGraph saver's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from statecore.integrations.langgraph import StatecoreSaver
from statecore.store._migrate import upgrade_database
from tests.dbs import fresh_database

DIALECTS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mariadb", marks=pytest.mark.mariadb),
]


@asynccontextmanager
async def migrated_database(dialect: str, label: str = "lg") -> AsyncIterator[str]:
    async with fresh_database(dialect, label) as url:
        await upgrade_database(url)
        yield url


@asynccontextmanager
async def open_saver(dialect: str, **options: object) -> AsyncIterator[StatecoreSaver]:
    """A StatecoreSaver on a fresh, migrated database of ``dialect``."""
    async with (
        migrated_database(dialect) as url,
        StatecoreSaver.from_conn_string(url, **options) as saver,
    ):
        yield saver
