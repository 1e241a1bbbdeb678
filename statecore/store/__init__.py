"""Storage: the contract (``StateStore``), its backends, and ``open_store(url)``.

``memory://`` opens the in-memory reference backend; any SQLAlchemy URL opens the SQL backend
(SQLite, PostgreSQL, MariaDB/MySQL), which is imported only then, so memory users never load
database drivers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statecore.core._errors import DatabaseUnavailableError, InvalidInputError
from statecore.core._limits import DEFAULT_SESSION_TTL_SECONDS
from statecore.store._base import Clock, StateStore, StoreTransaction
from statecore.store._retry import run_transaction
from statecore.store.memory import MemoryStateStore

if TYPE_CHECKING:
    from statecore.core._tokens import TokenCounter

__all__ = [
    "MEMORY_URL",
    "MemoryStateStore",
    "StateStore",
    "StoreTransaction",
    "check_database_url",
    "normalize_database_url",
    "open_store",
    "redact_url",
    "run_transaction",
]

MEMORY_URL = "memory://"

# The async driver used when a URL names only the database: "postgresql://..." and the like.
_ASYNC_DRIVERS = {
    "sqlite": "aiosqlite",
    "postgresql": "asyncpg",
    "postgres": "asyncpg",
    "mysql": "asyncmy",
    "mariadb": "asyncmy",
}
# Async drivers SQLAlchemy knows for each database, accepted as given.
_ACCEPTED_DRIVERS = {
    "sqlite": {"aiosqlite"},
    "postgresql": {"asyncpg"},
    "mysql": {"asyncmy"},
    "mariadb": {"asyncmy"},
}


def normalize_database_url(url: str) -> str:
    """The SQLAlchemy async URL for ``url``.

    ``sqlite:///path``, ``postgresql://``/``postgres://``, ``mysql://`` and ``mariadb://``
    get their async driver (aiosqlite, asyncpg, asyncmy); URLs that already name a supported
    async driver are returned unchanged. Anything else is an InvalidInputError saying which
    forms work.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if not isinstance(url, str) or not url.strip():
        raise InvalidInputError("database URL must be a non-empty string, e.g. sqlite:///agent.db")
    scheme, sep, _ = url.partition("://")
    if not sep:
        raise InvalidInputError(
            f"{url!r} is not a database URL; use memory://, sqlite:///path, "
            "postgresql://user@host/db or mysql://user@host/db"
        )
    database, _, driver = scheme.lower().partition("+")
    if database not in _ASYNC_DRIVERS:
        raise InvalidInputError(
            f"unsupported database {database!r} in {scheme}://; use memory://, sqlite, "
            "postgresql, mysql or mariadb"
        )
    canonical = "postgresql" if database == "postgres" else database
    if driver and driver not in _ACCEPTED_DRIVERS[canonical]:
        supported = ", ".join(f"{canonical}+{d}" for d in sorted(_ACCEPTED_DRIVERS[canonical]))
        raise InvalidInputError(
            f"driver {driver!r} is not supported (statecore is async); use {supported} or "
            f"plain {canonical}://"
        )
    rest = url[len(scheme) :]
    try:
        parsed = make_url(f"{canonical}+{driver or _ASYNC_DRIVERS[database]}{rest}")
    except ArgumentError as exc:
        raise InvalidInputError(f"malformed database URL: {exc}") from exc
    return parsed.render_as_string(hide_password=False)


def check_database_url(url: str) -> str:
    """The normalized ``url`` if it can be opened from here; InvalidInputError when it is
    malformed, DriverMissingError (naming the extra to install) when its driver is not
    installed. Nothing is connected."""
    if isinstance(url, str) and url.strip().lower() == MEMORY_URL:
        return MEMORY_URL
    database_url = normalize_database_url(url)
    from statecore.store.sql._engine import require_driver

    require_driver(database_url)
    return database_url


def database_address(url: str) -> str:
    """Where a database URL points, for messages: host:port (and database), or the SQLite
    file; never the user or password."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.database or ":memory:"
    default_port = 5432 if parsed.get_backend_name() == "postgresql" else 3306
    return f"{parsed.host or 'localhost'}:{parsed.port or default_port}/{parsed.database or ''}"


def redact_url(url: str) -> str:
    """A database URL fit for logs: the password hidden (a URL that does not parse is shown
    as it is: it holds nothing parseable as a password)."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"


async def open_store(
    url: str,
    *,
    token_counter: TokenCounter | None = None,
    clock: Clock | None = None,
    default_ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS,
    migrate: bool = False,
) -> StateStore:
    """Open the backend named by ``url``: ``memory://`` or a database URL.

    With ``migrate=True`` the database schema is first upgraded to the version this code
    needs (Alembic); otherwise a database at another version fails with MigrationError."""
    if isinstance(url, str) and url.strip().lower() == MEMORY_URL:
        return MemoryStateStore(
            token_counter=token_counter, clock=clock, default_ttl_seconds=default_ttl_seconds
        )
    database_url = check_database_url(url)
    from sqlalchemy.exc import InterfaceError, OperationalError

    from statecore.store.sql import SqlStateStore

    try:
        if migrate:
            from statecore.store._migrate import upgrade_database

            await upgrade_database(database_url)
        return await SqlStateStore.connect(
            database_url,
            token_counter=token_counter,
            clock=clock,
            default_ttl_seconds=default_ttl_seconds,
        )
    # A refused or silent server (OSError, the connect timeout) or the driver saying so.
    except (OSError, TimeoutError, OperationalError, InterfaceError) as exc:
        from statecore.store.sql._engine import CONNECT_TIMEOUT_SECONDS

        reason = (str(exc).strip().splitlines() or [""])[0]
        if isinstance(exc, TimeoutError) and not reason:
            reason = f"no answer within {CONNECT_TIMEOUT_SECONDS:g} s"
        raise DatabaseUnavailableError(
            f"cannot reach the database at {database_address(database_url)}: "
            f"{reason or type(exc).__name__}"
        ) from exc
