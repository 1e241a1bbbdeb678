"""A pytest plugin that runs the OpenAI Agents SDK's own session tests against StatecoreSession.

Loaded with ``-p statecore_vendor_plugin`` in the unpacked sdist's directory (see
``test_vendor_session_suite.py``). Before the SDK's tests are collected it replaces the session
classes they construct, ``agents.SQLiteSession`` and the SQLAlchemy extension's
``SQLAlchemySession``, with StatecoreSession on the database named by
``STATECORE_VENDOR_DATABASE_URL``. Each SQLite path (or SQLAlchemy URL/engine) a test would
have used becomes a statecore namespace of its own, so tests stay apart while two sessions a
test opens on the same file share it, as they would there. Tests that probe SQLite's or
SQLAlchemy's own internals are deselected by ``EXCLUDED`` (listed with their reasons in
docs/openai_agents.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from typing import Any

import pytest
from sqlalchemy.pool import NullPool

from statecore.integrations.openai_agents import StatecoreSession
from statecore.store import StateStore, normalize_database_url
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore

DATABASE_URL_ENV = "STATECORE_VENDOR_DATABASE_URL"

THREADS = "probes SQLiteSession's per-thread sqlite3 connections and its close()"
CORRUPT_ROWS = (
    "writes a corrupt row with the backend's own SQL; statecore refuses a non-JSON item at "
    "add_items, so no such row can exist"
)
SQLITE_LOCK = "probes SQLiteSession's private file lock and cached write connection"
ENGINE = "probes SQLAlchemySession's own engine, session factory or table setup"
EQUAL_TIMESTAMPS = "writes rows with equal timestamps through SQLAlchemySession's own engine"

#: "file::test" (parametrised variants included) -> why it cannot apply to a statecore session.
_EXCLUDED_BY_FILE: dict[str, dict[str, str]] = {
    "test_session.py": {
        "test_sqlite_session_close_closes_worker_thread_connections": THREADS,
        "test_sqlite_session_reaps_connections_from_exited_worker_threads": THREADS,
        "test_sqlite_session_closes_retired_connections_before_the_next_allocation": THREADS,
        "test_sqlite_session_keeps_connections_of_live_worker_threads": THREADS,
        "test_sqlite_session_closed_rejects_empty_add_items": THREADS,
        "test_sqlite_session_pop_item_skips_corrupt_most_recent": CORRUPT_ROWS,
        "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": CORRUPT_ROWS,
        "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": CORRUPT_ROWS,
        "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": CORRUPT_ROWS,
        "test_sqlite_session_file_lock_is_shared_across_instances": SQLITE_LOCK,
        "test_sqlite_session_failed_add_items_releases_write_lock": SQLITE_LOCK,
        "test_sqlite_session_failed_clear_session_rolls_back": SQLITE_LOCK,
        "test_sqlite_session_failed_pop_item_releases_write_lock": SQLITE_LOCK,
        "test_sqlite_session_rollback_failure_evicts_connection": SQLITE_LOCK,
        "test_sqlite_session_close_retries_quarantined_connection": SQLITE_LOCK,
        "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": SQLITE_LOCK,
    },
    "test_sqlalchemy_session.py": {
        "test_sqlalchemy_session_defaults_to_escaped_non_ascii_storage": ENGINE,
        "test_sqlalchemy_session_can_store_non_ascii_without_escaping": ENGINE,
        "test_sqlite_fallback_reserves_writer_before_tail_claim": ENGINE,
        "test_pop_item_supports_unknown_delete_rowcount": ENGINE,
        "test_pop_item_retries_returning_claim_lost_to_concurrent_delete": ENGINE,
        "test_mutation_cancellation_waits_for_transaction_exit": ENGINE,
        "test_pop_item_skips_corrupt_most_recent": CORRUPT_ROWS,
        "test_get_items_limit_skips_corrupt_newest_rows": CORRUPT_ROWS,
        "test_pop_item_returns_none_after_dropping_only_corrupt_rows": CORRUPT_ROWS,
        "test_add_items_waits_for_transient_sqlite_write_lock": ENGINE,
        "test_add_items_concurrent_first_access_across_from_url_sessions": ENGINE,
        "test_add_items_concurrent_first_access_across_from_url_sessions_cross_loop": ENGINE,
        "test_add_items_concurrent_first_access_with_shared_session_cross_loop": ENGINE,
        "test_add_items_cancelled_waiter_does_not_strand_table_init_lock": ENGINE,
        "test_create_tables_false_does_not_allocate_shared_init_lock": ENGINE,
        "test_get_items_same_timestamp_consistent_order": EQUAL_TIMESTAMPS,
        "test_pop_item_same_timestamp_returns_latest": EQUAL_TIMESTAMPS,
        "test_get_items_orders_by_id_for_ties": EQUAL_TIMESTAMPS,
        "test_engine_property_from_url": ENGINE,
        "test_engine_property_is_read_only": ENGINE,
        "test_sqlite_configuration_registry_releases_collected_engines": ENGINE,
        "test_sqlite_configuration_registry_does_not_grow_unbounded": ENGINE,
    },
}
EXCLUDED = {
    f"{file}::{test}": why
    for file, tests in _EXCLUDED_BY_FILE.items()
    for test, why in tests.items()
}

_stores: dict[int, StateStore] = {}


async def _shared_store() -> StateStore:
    # One store per event loop (pytest-asyncio and run_sync each bring their own loop).
    # Connections are not pooled: a loop that ends (run_sync's, each test's) leaves none open
    # on a server other test runs share. The schema was migrated once, in pytest_configure.
    key = id(asyncio.get_running_loop())
    store = _stores.get(key)
    if store is None:
        url = normalize_database_url(os.environ[DATABASE_URL_ENV])
        store = await SqlStateStore.connect(url, check_schema=False, poolclass=NullPool)
        _stores[key] = store
    return store


def _namespace(place: Any) -> str:
    if place is None or str(place) == ":memory:" or "memory" in str(place):
        return "v" + uuid.uuid4().hex[:20]  # a private in-memory database per instance
    return "v" + hashlib.sha256(str(place).encode()).hexdigest()[:20]


class _VendorSession(StatecoreSession):
    def __init__(self, session_id: str, namespace: str, session_settings: Any) -> None:
        super().__init__(
            session_id,
            database_url=os.environ[DATABASE_URL_ENV],
            namespace=namespace,
            session_settings=session_settings,
        )

    async def _store(self) -> StateStore:
        return await _shared_store()

    def close(self) -> None:  # type: ignore[override]  # the SDK's sessions close synchronously
        pass


class SQLiteSessionOnStatecore(_VendorSession):
    """Constructed like ``agents.SQLiteSession(session_id, db_path, ...)``."""

    def __init__(
        self,
        session_id: str,
        db_path: Any = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        super().__init__(session_id, _namespace(db_path), session_settings)


class SQLAlchemySessionOnStatecore(_VendorSession):
    """Constructed like the SQLAlchemy extension's ``SQLAlchemySession``."""

    def __init__(
        self,
        session_id: str,
        *,
        engine: Any = None,
        create_tables: bool = False,
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
        **storage_options: Any,  # how SQLAlchemy's rows are encoded: not statecore's concern
    ) -> None:
        place = getattr(engine, "url", None) if engine is not None else None
        super().__init__(session_id, _namespace(place), session_settings)
        self.engine = engine

    @classmethod
    def from_url(
        cls,
        session_id: str,
        *,
        url: str,
        engine_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SQLAlchemySessionOnStatecore:
        session = cls(session_id, **kwargs)
        # Same URL, same database: map it to one namespace (":memory:" URLs stay private).
        if "memory" not in url:
            session.ref = session.ref.model_copy(update={"namespace": _namespace(url)})
        return session


def pytest_configure(config: pytest.Config) -> None:
    asyncio.run(upgrade_database(normalize_database_url(os.environ[DATABASE_URL_ENV])))
    import agents
    import agents.memory
    import agents.memory.sqlite_session

    agents.SQLiteSession = SQLiteSessionOnStatecore  # type: ignore[misc,assignment]
    agents.memory.SQLiteSession = SQLiteSessionOnStatecore  # type: ignore[misc,assignment]
    try:
        import agents.extensions.memory.sqlalchemy_session as sqlalchemy_session
    except ImportError:
        return
    sqlalchemy_session.SQLAlchemySession = SQLAlchemySessionOnStatecore  # type: ignore[misc]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        name = item.nodeid.rsplit("/", 1)[-1].split("[", 1)[0]
        reason = EXCLUDED.get(name)
        (dropped if reason else kept).append(item)
    items[:] = kept
    config.hook.pytest_deselected(items=dropped)
