"""Which database errors are transient conflicts: the database rolled the transaction back
(or gave up waiting for a lock) and the same transaction, run again, may succeed.

Only the error codes that mean exactly that count. A lost connection, a full disk or a
constraint violation is not a conflict: retrying the transaction here would hide an outage
or repeat a mistake, so those propagate (a Temporal activity then retries on its own terms).
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy.exc import DBAPIError

#: ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT.
MYSQL_TRANSIENT_CODES = frozenset({1213, 1205})
#: serialization_failure, deadlock_detected.
POSTGRES_TRANSIENT_STATES = frozenset({"40001", "40P01"})
#: SQLITE_BUSY, SQLITE_LOCKED (primary codes: extended codes carry them in the low byte).
SQLITE_TRANSIENT_CODES = frozenset({5, 6})


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every error it was raised from or during, each once.

    A deadlock inside a savepoint makes MariaDB drop the savepoint with the transaction, so
    the ``ROLLBACK TO SAVEPOINT`` that follows fails too and carries the deadlock as its
    context."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def _driver_error_is_transient(driver_error: BaseException, dialect: str) -> bool:
    if dialect == "mysql":
        args = driver_error.args
        return bool(args) and isinstance(args[0], int) and args[0] in MYSQL_TRANSIENT_CODES
    if dialect == "postgresql":
        return getattr(driver_error, "sqlstate", None) in POSTGRES_TRANSIENT_STATES
    if dialect == "sqlite":
        code = getattr(driver_error, "sqlite_errorcode", None)
        return isinstance(code, int) and (code & 0xFF) in SQLITE_TRANSIENT_CODES
    return False


def is_transient_conflict(error: BaseException, dialect: str) -> bool:
    """True when ``error`` (or an error it chains to) is a database error of ``dialect``
    ('mysql', 'postgresql', 'sqlite') saying the transaction lost to a concurrent one."""
    return any(
        isinstance(link, DBAPIError)
        and link.orig is not None
        and _driver_error_is_transient(link.orig, dialect)
        for link in _chain(error)
    )
