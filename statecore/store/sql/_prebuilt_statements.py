"""A turn's statements sent to the driver without SQLAlchemy's per-statement work.

SQLAlchemy's execution adds CPU to every statement, however small: the statement's cache
key and compiled-cache lookup, an execution context, parameter and result processing, a
greenlet to run its synchronous core, event dispatch. A turn's session header read costs
59 us through it on SQLite against 16 us sent directly, and 187 us against 96 us on
PostgreSQL; a chat turn runs 12-14 such statements (bench/README.md, "Retired comparisons",
``statement_cost``).

So the statements a turn runs are built once (``prebuilt``), compiled once per database and
set of parameter names, exactly as SQLAlchemy compiles them, and sent straight to the
driver with the bind and result processing SQLAlchemy's compiler chose for them: the same
SQL, the same values, the same rows. Everything else a store does (schema changes, ad-hoc
queries, migrations) keeps going through SQLAlchemy.

The direct path is taken only where it changes nothing anyone can see:

- on SQLite through statecore's own driver (``sqlite_driver.InlineConnection``), which
  decides per statement whether it runs in place or on the connection's thread; on
  PostgreSQL through SQLAlchemy's asyncpg adapter, doing what its cursor does (the
  adapter's transaction, prepared-statement cache and error translation). MariaDB's
  statements all go through SQLAlchemy;
- when nobody listens to the engine's statement events (``before_cursor_execute``,
  ``after_cursor_execute``, ``handle_error``) and SQLAlchemy does not log statements
  (``echo``, or the ``sqlalchemy.engine`` logger at INFO): an application's SQL tracing,
  a statement log, a test counting statements, still sees every statement, since then
  every statement goes through SQLAlchemy;
- for statements SQLAlchemy would not change at execution time: no Python-side column
  defaults, no expanding (``IN``) parameters, no implicit RETURNING.

A driver error is raised as SQLAlchemy would raise it (``sqlalchemy.exc.DBAPIError`` of the
matching class, the driver's error as ``orig``; a lost connection is invalidated), so
retries and typed errors see no difference.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import util
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError, MultipleResultsFound, NoResultFound
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

from statecore.store.sql._sqlite_driver import InlineConnection

P = ParamSpec("P")
S = TypeVar("S")

#: Statements ``prebuilt`` made, by id. Each is kept alive here, so an id is never reused.
_PLANS: dict[int, _Plan] = {}
#: The connection events under which a statement must go through SQLAlchemy (see the
#: module's doc); ``handle_error`` is the dialect's.
_STATEMENT_EVENTS = ("before_cursor_execute", "after_cursor_execute")
#: What this module uses of SQLAlchemy's asyncpg adapter (internal to SQLAlchemy, the same
#: from 2.0 to 2.1): where one is missing, PostgreSQL's statements all go through SQLAlchemy.
_ASYNCPG_ADAPTER_FITS = all(
    hasattr(AsyncAdapt_asyncpg_connection, name)
    for name in (
        "_execute_mutex",
        "_transaction",
        "_start_transaction",
        "_prepare",
        "_check_type_cache_invalidation",
        "_handle_exception",
        "_connection",
        "isolation_level",
    )
)
#: Await a coroutine from synchronous code SQLAlchemy runs in its greenlet (2.1's name first).
_await = getattr(util, "await_", None) or util.await_only
#: The row count in PostgreSQL's command status, read as SQLAlchemy's asyncpg cursor reads it.
_ROWCOUNT = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")


def prebuilt(build: Callable[P, S]) -> Callable[P, S]:
    """``functools.cache`` for a function that builds a statement: it is built once per
    argument combination, and the statements it returns may run without SQLAlchemy's
    execution (``run``)."""

    @functools.cache
    @functools.wraps(build)
    def cached(*args: Any, **kwargs: Any) -> S:
        statement = build(*args, **kwargs)
        _PLANS[id(statement)] = _Plan(statement)
        return statement

    return cached  # type: ignore[return-value]


def register(statement: S) -> S:
    """Mark a statement built once (a module constant) as one that may run directly."""
    _PLANS.setdefault(id(statement), _Plan(statement))
    return statement


class DirectRow(tuple[Any, ...]):
    """A result row: by position, by column name as an attribute, and as ``_mapping``
    (what the stores use of SQLAlchemy's ``Row``)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _index: Mapping[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self._index[name]]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def _mapping(self) -> dict[str, Any]:
        return dict(zip(self._fields, self, strict=True))


class DirectResult:
    """What the stores use of SQLAlchemy's ``CursorResult``, for rows read in full."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[DirectRow], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[DirectRow]:
        return iter(self._rows)

    def first(self) -> DirectRow | None:
        return self._rows[0] if self._rows else None

    def all(self) -> list[DirectRow]:
        return list(self._rows)

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalar_one(self) -> Any:
        if len(self._rows) != 1:
            raise (
                NoResultFound("expected exactly one row")
                if not self._rows
                else MultipleResultsFound("expected exactly one row")
            )
        return self._rows[0][0]


class _Compiled:
    """One statement compiled for one database and one set of parameter names."""

    __slots__ = ("binds", "compiled", "fixed", "names", "plain_read", "results", "row", "sql")

    def __init__(self, compiled: SQLCompiler, dialect: Dialect) -> None:
        self.compiled = compiled
        self.sql = compiled.string
        self.names = tuple(compiled.positiontup or ())
        self.binds: Any = compiled._bind_processors
        # Values the statement holds itself (a literal such as ``revision + 1``'s 1).
        self.fixed = {
            name: bind.value
            for name, bind in ((n, compiled.binds[n]) for n in self.names)
            if not bind.required and bind.callable is None
        }
        columns = compiled._result_columns
        fields = tuple(column.keyname for column in columns)
        self.row: type[DirectRow] = type(
            "Row",
            (DirectRow,),
            {"__slots__": (), "_fields": fields, "_index": {f: i for i, f in enumerate(fields)}},
        )
        self.results = tuple(
            column.type._cached_result_processor(dialect, None) for column in columns
        )
        self.plain_read = _plain_read(compiled)

    def arguments(self, parameters: Mapping[str, Any] | None) -> list[Any] | None:
        """The positional values, as SQLAlchemy's ``construct_params`` and bind processors
        make them: each name's value from ``parameters``, else the statement's own (a
        literal it holds). None when a value is missing or computed at execution: the
        statement then goes through SQLAlchemy, which raises its own error or computes it."""
        given = parameters or {}
        fixed, binds = self.fixed, self.binds
        try:
            values = [given[n] if n in given else fixed[n] for n in self.names]
        except KeyError:
            return None
        return [binds[n](v) if n in binds else v for n, v in zip(self.names, values, strict=True)]

    def rows(self, raw: list[Any]) -> list[DirectRow]:
        make, results = self.row, self.results
        if not any(results):
            return [make(r) for r in raw]
        return [
            make(
                value if process is None else process(value)
                for process, value in zip(results, r, strict=True)
            )
            for r in raw
        ]


def _plain_read(compiled: SQLCompiler) -> bool:
    """Whether the statement only reads: a SELECT that locks no row (no ``FOR UPDATE``) and
    writes nothing through a CTE."""
    statement: Any = compiled.statement
    if not getattr(statement, "is_select", False) or statement._for_update_arg is not None:
        return False
    return not any(getattr(cte.element, "is_dml", False) for cte in compiled.ctes or ())


class _Plan:
    """A prebuilt statement and its compilations, made on first use."""

    __slots__ = ("_compiled", "statement")

    def __init__(self, statement: Any) -> None:
        self.statement = statement
        self._compiled: dict[tuple[Any, ...], _Compiled | None] = {}

    def compiled(self, keys: tuple[str, ...], many: bool, dialect: Dialect) -> _Compiled | None:
        """The statement compiled as SQLAlchemy compiles it for these parameter names, or
        None when it needs SQLAlchemy's execution (see the module's doc)."""
        # What a compilation depends on: the database and its version, the names, many.
        key = (dialect.name, dialect.server_version_info, keys, many)
        found = self._compiled.get(key, False)
        if found is not False:
            return found  # type: ignore[return-value]
        compiled = self.statement.compile(
            dialect=dialect, column_keys=list(keys), for_executemany=many
        )
        usable = (
            compiled.positional
            and not compiled.insert_prefetch
            and not compiled.update_prefetch
            and not compiled.literal_execute_params
            and not compiled.post_compile_params
            and not compiled.implicit_returning
            and not (many and compiled._result_columns)
            and len({c.keyname for c in compiled._result_columns}) == len(compiled._result_columns)
            and all(c.keyname.isidentifier() for c in compiled._result_columns)
        )
        plan = _Compiled(compiled, dialect) if usable else None
        self._compiled[key] = plan
        return plan


Driver = InlineConnection | AsyncAdapt_asyncpg_connection


def driver_for(conn: AsyncConnection) -> Driver | None:
    """The connection's driver, when prebuilt statements may skip SQLAlchemy on it: on
    SQLite statecore's own, on PostgreSQL SQLAlchemy's asyncpg adapter, and nobody watches
    statements (see the module's doc). None otherwise."""
    sync = conn.sync_connection
    return None if sync is None else driver_of(sync)


def driver_of(sync: Connection) -> Driver | None:
    """``driver_for`` of a synchronous ``Connection`` (inside SQLAlchemy's events)."""
    dialect = sync.dialect
    if dialect.name not in ("sqlite", "postgresql"):
        return None
    if any(getattr(sync.dispatch, watched) for watched in _STATEMENT_EVENTS):
        return None
    if dialect.dispatch.handle_error or sync._echo:  # _echo: SQLAlchemy logs statements
        return None
    pooled = sync.connection
    if dialect.name == "sqlite":
        driver = getattr(pooled, "driver_connection", None)
        return driver if isinstance(driver, InlineConnection) else None
    adapter = pooled.dbapi_connection
    if _ASYNCPG_ADAPTER_FITS and isinstance(adapter, AsyncAdapt_asyncpg_connection):
        return adapter
    return None


def begin(sync: Connection, sql: str) -> None:
    """``sync.exec_driver_sql(sql)`` for the BEGIN a SQLite transaction sends from
    SQLAlchemy's ``begin`` event, sent to statecore's driver directly when nobody watches
    statements; a failure (the write lock not free within the busy timeout) is raised as
    SQLAlchemy raises it."""
    driver = driver_of(sync)
    if not isinstance(driver, InlineConnection):
        sync.exec_driver_sql(sql)
        return
    try:
        _await(driver.run(sqlite3.Cursor.execute, sql, ()))
    except sqlite3.Error as exc:
        raise _sqlite_error(sql, (), exc, sync.dialect) from exc


def reads_committed(driver: Driver | None, conn: AsyncConnection) -> bool:
    """Whether ``driver`` is PostgreSQL's and its transactions run at READ COMMITTED (the
    level chosen for the connection, else the server's default), where every statement
    reads its own snapshot, inside a transaction or not (see ``run``'s ``read_only``)."""
    if not isinstance(driver, AsyncAdapt_asyncpg_connection):
        return False
    level = driver.isolation_level
    if level is None:
        return conn.dialect.default_isolation_level == "READ COMMITTED"
    return level == "read_committed"


async def run(
    conn: AsyncConnection,
    driver: Driver | None,
    statement: Any,
    parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    *,
    read_only: bool = False,
    autocommit: bool = False,
) -> Any:
    """``conn.execute(statement, parameters)``, sent to ``driver`` directly when the
    statement is ``prebuilt`` and ``driver`` is given (``driver_for``).

    ``autocommit`` (PostgreSQL): the statement is all the caller's transaction writes, and
    it has sent nothing before. Sent directly, it then opens no server transaction: it
    commits on its own, as one statement does, and the BEGIN and COMMIT round trips are
    saved. Through SQLAlchemy it runs in the transaction as any statement does.

    ``read_only``: the caller's transaction is a read-only block on a PostgreSQL connection
    that ``reads_committed``. A plain read sent before the block's first write then opens
    no transaction on the server: at READ COMMITTED each statement sees the rows committed
    when it starts, in a transaction or not, and a plain read holds no lock a transaction
    would keep. A block that only reads (a turn's context) then sends neither BEGIN nor
    COMMIT, two round trips fewer; a write still begins the transaction it runs in.

    The isolation level is the one SQLAlchemy read from the server when the engine first
    connected (or the one chosen for the engine or connection): a server default changed
    afterwards (``ALTER DATABASE ... SET default_transaction_isolation``) is seen once the
    engine is created again."""
    plan = _PLANS.get(id(statement)) if driver is not None else None
    if plan is None or driver is None:
        return await conn.execute(statement, parameters)
    many = isinstance(parameters, Sequence) and not isinstance(parameters, Mapping)
    sets: Sequence[Mapping[str, Any]] = parameters if many else [parameters or {}]  # type: ignore[assignment,list-item]
    if not sets:
        return await conn.execute(statement, parameters)
    compiled = plan.compiled(tuple(sorted(sets[0])), len(sets) > 1, conn.dialect)
    if compiled is None:
        return await conn.execute(statement, parameters)
    arguments: Any = [compiled.arguments(s) for s in sets]
    if any(a is None for a in arguments):
        return await conn.execute(statement, parameters)
    if len(sets) == 1:
        arguments = arguments[0]
    if isinstance(driver, InlineConnection):
        return await _on_sqlite(conn, driver, compiled, arguments, len(sets) > 1)
    in_transaction = not ((read_only and compiled.plain_read) or autocommit)
    return await _on_asyncpg(conn, driver, compiled, arguments, len(sets) > 1, in_transaction)


async def _on_sqlite(
    conn: AsyncConnection, driver: InlineConnection, compiled: _Compiled, arguments: Any, many: bool
) -> DirectResult:
    # run() decides whether the statement runs here or on the connection's thread.
    call = sqlite3.Cursor.executemany if many else sqlite3.Cursor.execute
    try:
        _, raw, rowcount, _ = await driver.run(call, compiled.sql, arguments)
    except sqlite3.Error as exc:
        raise _sqlite_error(compiled.sql, arguments, exc, conn.dialect) from exc
    return DirectResult(compiled.rows(raw), rowcount)


def _sqlite_error(sql: str, arguments: Any, error: sqlite3.Error, dialect: Dialect) -> Exception:
    """The ``sqlalchemy.exc`` error SQLAlchemy raises for this sqlite3 error."""
    return DBAPIError.instance(sql, arguments, error, sqlite3.Error, dialect=dialect)


async def _on_asyncpg(
    conn: AsyncConnection,
    adapter: AsyncAdapt_asyncpg_connection,
    compiled: _Compiled,
    arguments: Any,
    many: bool,
    in_transaction: bool = True,
) -> DirectResult:
    """What SQLAlchemy's asyncpg cursor does for one execute: the adapter's transaction
    (begun on the first statement, as the cursor begins it, unless ``in_transaction`` is
    False), its prepared-statement cache and its error translation; then SQLAlchemy's
    disconnect handling."""
    dialect: Any = conn.dialect
    raw: list[Any] = []
    status: str | None = None
    try:
        async with adapter._execute_mutex:
            if adapter._transaction is None and in_transaction:
                await adapter._start_transaction()
            try:
                if many:
                    await adapter._check_type_cache_invalidation(
                        dialect._invalidate_schema_cache_asof
                    )
                    await adapter._connection.executemany(compiled.sql, arguments)
                else:
                    prepared, _ = await adapter._prepare(
                        compiled.sql, dialect._invalidate_schema_cache_asof
                    )
                    raw = await prepared.fetch(*arguments)
                    status = prepared.get_statusmsg()
            except Exception as error:
                adapter._handle_exception(error)  # raises it as the adapter's DBAPI error
    except dialect.loaded_dbapi.Error as exc:
        gone = dialect.is_disconnect(exc, adapter, None)
        if gone:
            await conn.invalidate(exc)
        raise DBAPIError.instance(
            compiled.sql,
            arguments,
            exc,
            dialect.loaded_dbapi.Error,
            connection_invalidated=gone,
            dialect=dialect,
        ) from exc
    counted = _ROWCOUNT.match(status or "")
    return DirectResult(compiled.rows(raw), int(counted.group(1)) if counted else -1)


__all__ = [
    "DirectResult",
    "DirectRow",
    "Driver",
    "begin",
    "driver_for",
    "driver_of",
    "prebuilt",
    "reads_committed",
    "register",
    "run",
]
