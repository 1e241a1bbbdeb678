"""Fixtures of the storage conformance suite: one ``store`` per backend.

Every test that takes ``store`` runs on memory, SQLite, PostgreSQL and MariaDB. SQL backends
get one fresh database per test module (migrated with Alembic, dropped afterwards); each test
uses its own namespace, so tests sharing a database never see each other's rows. A backend
that cannot run here is skipped with the reason.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest

from statecore.core._models import SessionRef
from statecore.core._tokens import TokenCounter
from statecore.store import MemoryStateStore, StateStore
from tests.dbs import create_database, drop_database
from tests.store.bad_input import Env, populate

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mariadb", id="mariadb", marks=pytest.mark.mariadb),
]
_SERVER_DIALECT = {"postgres": "postgresql", "mariadb": "mysql"}
#: Microseconds on purpose: every backend must return the timestamps it was given, exactly.
CLOCK_START = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


class FakeClock:
    """A clock the test moves by hand, so TTL tests never sleep."""

    def __init__(self, start: datetime = CLOCK_START) -> None:
        self._now = start

    def __call__(self) -> datetime:
        return self._now

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        self._now += timedelta(seconds=seconds, **delta)
        return self._now


def _sql_backend_missing() -> str | None:
    try:
        from statecore.store._migrate import upgrade_database  # noqa: F401
        from statecore.store.sql import SqlStateStore  # noqa: F401
    except ImportError as exc:
        return f"the SQL backend is not importable yet: {exc}"
    return None


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
async def database_url(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str | None]:
    """A migrated database for this module on ``backend`` (None for memory)."""
    if backend == "memory":
        yield None
        return
    reason = _sql_backend_missing()
    if reason is not None:
        pytest.skip(reason)
    from statecore.store._migrate import upgrade_database

    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('conformance') / 'state.db'}"
        await upgrade_database(url)
        yield url
        return
    url = await create_database(_SERVER_DIALECT[backend], "conf")
    try:
        await upgrade_database(url)
        yield url
    finally:
        await drop_database(url)


@pytest.fixture(scope="session")
def token_counter() -> TokenCounter:
    return TokenCounter()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(
    backend: str, database_url: str | None, clock: FakeClock, token_counter: TokenCounter
) -> AsyncIterator[StateStore]:
    if database_url is None:
        opened: StateStore = MemoryStateStore(token_counter=token_counter, clock=clock)
    else:
        from statecore.store.sql import SqlStateStore

        opened = await SqlStateStore.connect(database_url, token_counter=token_counter, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def ns() -> str:
    """A namespace no other test uses."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def make_ref(ns: str) -> Callable[..., SessionRef]:
    def make(session_id: str = "s1", agent_id: str = "agent", namespace: str | None = None):
        return SessionRef(namespace=namespace or ns, agent_id=agent_id, session_id=session_id)

    return make


@pytest.fixture
def ref(make_ref: Callable[..., SessionRef]) -> SessionRef:
    return make_ref()


@pytest.fixture
async def env(store: StateStore, make_ref: Callable[..., SessionRef]) -> Env:
    """A namespace with two populated sessions and shared rows (the bad-input tables)."""
    return await populate(store, make_ref("s1"), make_ref("s2"))
