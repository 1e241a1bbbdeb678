"""One migration at a time per database, whatever number of workers start together.

Workers commonly run ``open_store(..., migrate=True)`` at start-up; several of them against
an empty database would otherwise all create the same tables and all but one fail. Each
migration first takes a database-wide lock, then reads the revision and upgrades:

- PostgreSQL: a transaction-level advisory lock (``pg_advisory_xact_lock``), released when
  the migration's transaction ends, waiting at most ``timeout`` (``lock_timeout``).
- MariaDB/MySQL: a named lock (``GET_LOCK``), per database, waiting at most ``timeout``;
  it outlives transactions, so the migration commits before releasing it.
- SQLite: the migration's transaction starts with ``BEGIN IMMEDIATE`` (see ``engine``), which
  already holds the database's single write lock; a second migration waits at BEGIN for up to
  the connection's busy timeout.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from statecore.core._errors import MigrationError

#: Seconds a migration waits for another process's migration of the same database.
MIGRATION_LOCK_TIMEOUT_SECONDS = 120.0
#: The named lock on MariaDB/MySQL (server-wide, so the database name is appended).
MYSQL_LOCK_PREFIX = "statecore.migrate:"
#: The advisory lock key on PostgreSQL (advisory locks are already scoped to one database): a
#: fixed 64-bit number derived from a name, so no other application's key collides with it by
#: accident.
POSTGRES_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"statecore.migrate").digest()[:8], "big", signed=True
)
_POSTGRES_LOCK_NOT_AVAILABLE = "55P03"


@contextmanager
def migration_lock(
    connection: Connection, timeout: float = MIGRATION_LOCK_TIMEOUT_SECONDS
) -> Iterator[None]:
    """Hold the database's migration lock for the block (``connection`` is in a
    transaction). MigrationError when another migration holds it for longer than
    ``timeout`` seconds."""
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    dialect = connection.dialect.name
    if dialect == "postgresql":
        _lock_postgresql(connection, timeout)
        yield
    elif dialect in ("mysql", "mariadb"):
        name = _lock_mysql(connection, timeout)
        try:
            yield
        finally:
            connection.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": name})
    else:
        yield


def _waited_too_long(what: str, timeout: float) -> MigrationError:
    return MigrationError(
        f"waited {timeout:g} s for {what}, held by another process migrating this database; "
        "if no migration is running, look for a stuck session holding it"
    )


def _lock_postgresql(connection: Connection, timeout: float) -> None:
    previous = connection.scalar(text("SELECT current_setting('lock_timeout')"))
    connection.execute(
        text("SELECT set_config('lock_timeout', :value, true)"),
        {"value": f"{int(timeout * 1000)}ms"},
    )
    try:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": POSTGRES_LOCK_KEY})
    except DBAPIError as exc:
        if _sqlstate(exc) == _POSTGRES_LOCK_NOT_AVAILABLE:
            raise _waited_too_long(
                f"PostgreSQL advisory lock {POSTGRES_LOCK_KEY}", timeout
            ) from exc
        raise
    # The migration's own statements keep whatever lock wait the user configured.
    connection.execute(text("SELECT set_config('lock_timeout', :value, true)"), {"value": previous})


def _lock_mysql(connection: Connection, timeout: float) -> str:
    database = connection.scalar(text("SELECT DATABASE()"))
    # GET_LOCK names are limited to 64 characters.
    name = f"{MYSQL_LOCK_PREFIX}{database}"[:64]
    acquired = connection.scalar(
        text("SELECT GET_LOCK(:name, :timeout)"), {"name": name, "timeout": timeout}
    )
    if acquired != 1:
        raise _waited_too_long(f"MariaDB/MySQL lock {name!r}", timeout)
    return name


def _sqlstate(exc: DBAPIError) -> str | None:
    orig = exc.orig
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return code if isinstance(code, str) else None
