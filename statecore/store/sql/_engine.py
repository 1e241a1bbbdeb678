"""Database URL -> AsyncEngine, with the settings each dialect needs for statecore.

- SQLite (aiosqlite): a transaction's statements run on the event loop's thread once it holds
  its locks (``sqlite_driver``), WAL journal,
  foreign keys on, a busy timeout, and every transaction
  opened with ``BEGIN IMMEDIATE``. SQLite has one writer; taking the write lock at BEGIN
  makes a second writer wait (up to the busy timeout) instead of failing with "database is
  locked" when a read transaction later tries to write. A transaction opened read-only
  (the ``READ_ONLY_OPTION`` execution option) starts with a plain deferred ``BEGIN``: in
  WAL mode it reads a snapshot and never waits for the write lock.
- PostgreSQL (asyncpg) and MariaDB/MySQL: a pooled connection idle for a second or more is
  pinged before use (``liveness``), not every one.
- PostgreSQL (asyncpg): READ COMMITTED (the server default) plus row locks where it matters.
- MariaDB/MySQL (asyncmy): utf8mb4, READ COMMITTED (no gap locks, so concurrent inserts of
  different keys do not deadlock) and strict SQL mode (oversized values fail instead of being
  truncated).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from statecore.core._errors import DriverMissingError, InvalidInputError
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql import _sqlite_driver as sqlite_driver
from statecore.store.sql._liveness import ping_after_idle

#: Seconds a SQLite transaction waits for the write lock before failing.
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0
#: Connection execution option marking a transaction that only reads.
READ_ONLY_OPTION = "statecore_read_only"

#: Seconds a new PostgreSQL or MariaDB connection may take before the database counts as
#: unreachable (the drivers' own defaults are 60 s or none).
CONNECT_TIMEOUT_SECONDS = 10.0
#: The statecore extra that installs each driver.
_DRIVER_EXTRAS = {"asyncpg": "postgres", "asyncmy": "mysql"}

_DRIVERS = {
    "sqlite": "aiosqlite",
    "postgresql": "asyncpg",
    "mysql": "asyncmy",
    "mariadb": "asyncmy",
}


def dialect_name(url: str | URL) -> str:
    """'sqlite', 'postgresql' or 'mysql' (MariaDB included) for a database URL."""
    backend = make_url(url).get_backend_name()
    if backend not in _DRIVERS:
        raise InvalidInputError(
            f"unsupported database {backend!r}; use sqlite+aiosqlite, postgresql+asyncpg "
            "or mysql+asyncmy"
        )
    return "mysql" if backend == "mariadb" else backend


def require_driver(url: str | URL) -> None:
    """DriverMissingError naming the extra to install unless ``url``'s driver is importable.

    Checked before anything starts: without it the import fails inside the worker's start-up,
    where temporalio's worker would wait forever for a shutdown that never comes."""
    parsed = make_url(url)
    driver = parsed.get_driver_name()
    if importlib.util.find_spec(driver) is not None:
        return
    extra = _DRIVER_EXTRAS.get(driver)
    install = f"pip install 'statecore[{extra}]'" if extra else f"pip install {driver}"
    raise DriverMissingError(
        f"{parsed.get_backend_name()} URLs need the {driver} driver, which is not installed: "
        f"{install}"
    )


def is_sqlite_memory(url: str | URL) -> bool:
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def create_store_engine(url: str | URL, **engine_kwargs: Any) -> AsyncEngine:
    """An AsyncEngine for ``url`` configured for statecore; ``engine_kwargs`` override."""
    parsed = make_url(url)
    dialect = dialect_name(parsed)
    if parsed.get_driver_name() != _DRIVERS[parsed.get_backend_name()]:
        raise InvalidInputError(
            f"{parsed.drivername!r} is not an async driver statecore supports; use "
            f"{parsed.get_backend_name()}+{_DRIVERS[parsed.get_backend_name()]}"
        )
    require_driver(parsed)
    if dialect == "sqlite":
        return _sqlite_engine(parsed, engine_kwargs)
    # Unless the caller chose pool_pre_ping, only connections that sat idle are pinged, and
    # the default pool hands out the connection returned last, so the busy ones stay busy.
    # A pool class or pool of the caller's own may take no such setting (NullPool does not).
    ping_idle = "pool_pre_ping" not in engine_kwargs
    if ping_idle and "poolclass" not in engine_kwargs and "pool" not in engine_kwargs:
        engine_kwargs.setdefault("pool_use_lifo", True)
    connect_args = engine_kwargs.setdefault("connect_args", {})
    # asyncpg calls it `timeout`, asyncmy `connect_timeout`.
    connect_args.setdefault(
        "timeout" if dialect == "postgresql" else "connect_timeout", CONNECT_TIMEOUT_SECONDS
    )
    if dialect == "mysql":
        if "charset" not in parsed.query:
            parsed = parsed.update_query_dict({"charset": "utf8mb4"})
        engine_kwargs.setdefault("isolation_level", "READ COMMITTED")
        # MySQL closes idle connections after wait_timeout (8 h by default).
        engine_kwargs.setdefault("pool_recycle", 3600)
        engine = create_async_engine(parsed, **engine_kwargs)
        event.listen(engine.sync_engine, "connect", _mysql_on_connect)
    else:
        engine = create_async_engine(parsed, **engine_kwargs)
    if ping_idle:
        ping_after_idle(engine)
    return engine


def _sqlite_engine(url: URL, engine_kwargs: dict[str, Any]) -> AsyncEngine:
    connect_args = dict(engine_kwargs.pop("connect_args", {}))
    connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT_SECONDS)
    engine = create_async_engine(url, connect_args=connect_args, **engine_kwargs)
    memory = is_sqlite_memory(url)

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module (it would skip BEGIN before
        # SELECT and SAVEPOINT); SQLAlchemy's "begin" event below emits our own BEGIN.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys = ON")
            if not memory:  # do_connect put the database in WAL mode
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    def on_begin(conn: Any) -> None:
        read_only = conn.get_execution_options().get(READ_ONLY_OPTION, False)
        prebuilt_statements.begin(conn, "BEGIN" if read_only and not memory else "BEGIN IMMEDIATE")

    def do_connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        # SQLAlchemy's own aiosqlite connect, with connections that leave their thread out
        # of a locked transaction's statements (see sqlite_driver), a file's in WAL mode.
        creator = sqlite_driver.connect if memory else sqlite_driver.connect_in_wal_mode
        return dialect.loaded_dbapi.connect(*cargs, async_creator_fn=creator, **cparams)

    event.listen(engine.sync_engine, "do_connect", do_connect)
    event.listen(engine.sync_engine, "connect", on_connect)
    event.listen(engine.sync_engine, "begin", on_begin)
    return engine


def _mysql_on_connect(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(
            "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), "
            "'STRICT_ALL_TABLES', 'NO_ENGINE_SUBSTITUTION')"
        )
    finally:
        cursor.close()
