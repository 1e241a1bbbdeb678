"""KV buckets in SQL: a revision per write, compare-and-set, per-key TTL.

An expired row stays until ``sweep_expired`` deletes it, but every read filters it out and
every write treats it as absent, so expiry is exact without a sweeper running.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from statecore.core._errors import ContentTooLargeError, RevisionConflictError
from statecore.core._models import (
    KeyPage,
    KVEntry,
    KVScope,
)
from statecore.store._inputs import (
    KVPut,
    RestoredKV,
    checked_kv_put,
    decode_json,
)
from statecore.store._kv_contract import KVStore
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql._batches import chunked
from statecore.store.sql._context import SqlContext
from statecore.store.sql._schema import kv_entries
from statecore.store.sql._upsert import upsert

c = kv_entries.c
_KEY_COLUMNS = ("namespace", "owner", "bucket", "key")


def _payload(encoded: bytes | str) -> bytes:
    # JSON is stored as its UTF-8 text, so both kinds share one binary column.
    return encoded.encode("utf-8") if isinstance(encoded, str) else encoded


def _entry(row: Any) -> KVEntry:
    value = bytes(row.value) if row.kind == "bytes" else decode_json(bytes(row.value).decode())
    return KVEntry(
        bucket=row.bucket,
        key=row.key,
        kind=row.kind,
        value=value,
        revision=row.revision,
        created_at=row.created_at,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
    )


def _prefix_range(column: Any, prefix: str) -> ColumnElement[bool]:
    """``column`` starts with ``prefix``, matched literally as a range on the index: the
    identifier columns compare byte by byte, and the key alphabet is ASCII below 0x7f, so
    every string with the prefix sorts in [prefix, prefix with its last character + 1)."""
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    return and_(column >= prefix, column < upper)


def _conflict(bucket: str, key: str, current: int, expected: int) -> RevisionConflictError:
    return RevisionConflictError(
        f"{bucket}/{key} is at revision {current}, not {expected}; read it again and retry",
        current=current,
        expected=expected,
    )


#: The columns an unconditional put writes; the new row's other columns are set on insert.
_PUT_COLUMNS = ("kind", "value", "updated_at", "expires_at")
_ROW_COLUMNS = (*_KEY_COLUMNS, "revision", "created_at", *_PUT_COLUMNS)


@prebuilt_statements.prebuilt
def _put_statement(dialect: str, returning: bool) -> Any:
    """The unconditional put, built once per dialect with bind parameters (``p_<column>``
    and ``p_now``): building the upsert and its ``excluded`` alias took longer than running
    it. A new key (or an expired one) starts again at revision 1, a live one goes up by one.
    Revision and created_at come first because MySQL applies the changes in order and they
    read the old expires_at."""
    values = {name: bindparam(f"p_{name}", type_=c[name].type) for name in _ROW_COLUMNS}
    now = bindparam("p_now", type_=c.expires_at.type)
    expired = and_(c.expires_at.is_not(None), c.expires_at <= now)

    def changes(proposed: Any) -> list[tuple[str, Any]]:
        return [
            ("revision", case((expired, 1), else_=c.revision + 1)),
            ("created_at", case((expired, proposed.created_at), else_=c.created_at)),
            *((name, proposed[name]) for name in _PUT_COLUMNS),
        ]

    statement = upsert(dialect, kv_entries, values, _KEY_COLUMNS, changes)
    return statement.returning(c.revision) if returning else statement


def upsert_statement(dialect: str) -> Any:
    """The unconditional put of ``SqlKVStore.upsert_parameters``, returning the revision."""
    return _put_statement(dialect, True)


@prebuilt_statements.prebuilt
def _create_statement(dialect: str) -> Any:
    """PostgreSQL and SQLite: a put with ``expected_revision=0`` as one statement. It inserts
    the key at revision 1, or takes over a row whose entry has expired (an expired entry is
    absent to every reader); a live entry is left alone and the statement changes no row.
    A concurrent creator of the same key waits on the unique index, then sees a live row."""
    module = postgresql if dialect == "postgresql" else sqlite
    values = {name: bindparam(f"p_{name}", type_=c[name].type) for name in _ROW_COLUMNS}
    statement: Any = module.insert(kv_entries).values(values)
    now = bindparam("p_now", type_=c.expires_at.type)
    return statement.on_conflict_do_update(
        index_elements=list(_KEY_COLUMNS),
        set_={name: statement.excluded[name] for name in ("revision", "created_at", *_PUT_COLUMNS)},
        where=and_(c.expires_at.is_not(None), c.expires_at <= now),
    )


@prebuilt_statements.prebuilt
def _get_statement() -> Any:
    """``get``, built once with bind parameters (``p_<key column>`` and ``p_now``): building
    the statement with its key and expiry conditions took about as long as running it, and
    a turn reads its record and the session's KV by key."""
    the_key = [c[name] == bindparam(f"p_{name}", type_=c[name].type) for name in _KEY_COLUMNS]
    now = bindparam("p_now", type_=c.expires_at.type)
    return select(kv_entries).where(*the_key, or_(c.expires_at.is_(None), c.expires_at > now))


@functools.cache
def _mysql_update_statement() -> Any:
    """MariaDB/MySQL: the unconditional put of a key that exists, as a plain UPDATE.

    On InnoDB, ``INSERT ... ON DUPLICATE KEY UPDATE`` of an existing key takes a next-key lock
    on it (its duplicate check does so even in READ COMMITTED): inserts of new keys into the
    gap before it, in any scope, wait until commit, and waiters that inherit the lock as a gap
    lock when an inserter rolls back can deadlock each other. An UPDATE locks only the row.
    ``LAST_INSERT_ID(revision)`` hands the new revision back in the statement's OK packet, so
    no SELECT follows. Revision and created_at come first: they read the old expires_at."""
    now = bindparam("p_now", type_=c.expires_at.type)
    expired = and_(c.expires_at.is_not(None), c.expires_at <= now)
    the_key = [c[name] == bindparam(f"p_{name}", type_=c[name].type) for name in _KEY_COLUMNS]
    return (
        update(kv_entries)
        .where(*the_key)
        .ordered_values(
            (c.revision, func.last_insert_id(case((expired, 1), else_=c.revision + 1))),
            (c.created_at, case((expired, bindparam("p_created_at")), else_=c.created_at)),
            *((c[name], bindparam(f"p_{name}", type_=c[name].type)) for name in _PUT_COLUMNS),
        )
    )


class SqlKVStore(KVStore):
    def __init__(self, ctx: SqlContext) -> None:
        self._ctx = ctx

    def _live(self) -> ColumnElement[bool]:
        return or_(c.expires_at.is_(None), c.expires_at > self._ctx.now)

    @staticmethod
    def _in_scope(scope: KVScope) -> ColumnElement[bool]:
        return and_(c.namespace == scope.namespace, c.owner == scope.owner)

    def _the_key(self, scope: KVScope, bucket: str, key: str) -> ColumnElement[bool]:
        return and_(self._in_scope(scope), c.bucket == bucket, c.key == key)

    async def _lock_owner(self, scope: KVScope) -> None:
        """Writes to a session's KV start at the session's header row (the lock order)."""
        if scope.owner:
            agent_id, session_id = scope.owner.split("/", 1)
            await self._ctx.lock_session(scope.namespace, agent_id, session_id)

    async def _live_revision(self, scope: KVScope, bucket: str, key: str) -> int:
        found = await self._ctx.conn.scalar(
            select(c.revision).where(self._the_key(scope, bucket, key), self._live())
        )
        return found or 0

    async def _put(
        self, scope: KVScope, bucket: str, key: str, put: KVPut, expected_revision: int | None
    ) -> int:
        await self._lock_owner(scope)
        columns = self._put_columns(put.kind, put.payload, put.ttl_seconds)
        if expected_revision is None:
            return await self._put_unconditionally(scope, bucket, key, columns)
        if expected_revision == 0:
            if not await self._create(scope, bucket, key, columns):
                current = await self._live_revision(scope, bucket, key)
                raise _conflict(bucket, key, current, 0)
            return 1
        changed = await self._ctx.conn.execute(
            update(kv_entries)
            .where(
                self._the_key(scope, bucket, key),
                c.revision == expected_revision,
                self._live(),
            )
            .values(revision=expected_revision + 1, **columns)
        )
        if changed.rowcount != 1:
            current = await self._live_revision(scope, bucket, key)
            raise _conflict(bucket, key, current, expected_revision)
        return expected_revision + 1

    async def upsert_parameters(
        self, scope: KVScope, bucket: str, key: str, value: Any
    ) -> dict[str, Any]:
        """PostgreSQL and SQLite: what ``put(scope, bucket, key, value)`` (no expected
        revision, no TTL) sends as its one upsert, as the bind parameters of
        ``upsert_statement``: checked as ``put`` checks them, with the owner's session locked
        first as ``put`` locks it. For a statement that carries the put beside other writes."""
        put = checked_kv_put(scope, bucket, key, value, None, None)
        await self._lock_owner(scope)
        row = self._new_row(scope, bucket, key, self._put_columns(put.kind, put.payload, None))
        return self._upsert_parameters(row)

    def _put_columns(
        self, kind: str, encoded: bytes | str, ttl_seconds: float | None
    ) -> dict[str, Any]:
        now = self._ctx.now
        self._check_fits_statement(encoded)
        return {
            "kind": kind,
            "value": _payload(encoded),
            "updated_at": now,
            "expires_at": None if ttl_seconds is None else now + timedelta(seconds=ttl_seconds),
        }

    def _check_fits_statement(self, encoded: bytes | str) -> None:
        """ContentTooLargeError before anything is sent when a value, escaped as the
        MariaDB/MySQL driver sends it, is over the server's ``max_allowed_packet``: the
        server would drop the statement with an error no retry can fix."""
        limit = self._ctx.max_packet
        if limit is None:
            return
        raw = encoded.encode("utf-8") if isinstance(encoded, str) else encoded
        escaped = sum(raw.count(b) for b in (b"\x00", b"\n", b"\r", b"\\", b"'", b'"', b"\x1a"))
        size = len(raw) + escaped + 4096
        if size > limit:
            raise ContentTooLargeError(
                f"KV value is {len(raw):,} bytes, more than this MariaDB/MySQL server accepts "
                f"in one statement (max_allowed_packet = {limit:,}). Raise the server's "
                "max_allowed_packet to 64M (the MySQL 8 default) to store values up to the "
                "16 MiB limit",
                size=len(raw),
                limit=limit,
            )

    def _upsert_parameters(self, row: dict[str, Any]) -> dict[str, Any]:
        params = {f"p_{name}": value for name, value in row.items()}
        params["p_now"] = self._ctx.now
        return params

    async def _create(self, scope: KVScope, bucket: str, key: str, columns: dict[str, Any]) -> bool:
        """Insert a key that has no live entry; False (nothing written) if it has one."""
        row = self._new_row(scope, bucket, key, columns)
        if self._ctx.dialect != "mysql":
            params = self._upsert_parameters(row)
            created = await self._ctx.execute(_create_statement(self._ctx.dialect), params)
            return created.rowcount == 1
        # MariaDB/MySQL's upsert cannot leave a live row untouched and say so: an expired
        # row is cleared first, then a plain insert takes the key unless a live one holds it.
        await self._ctx.conn.execute(
            delete(kv_entries).where(self._the_key(scope, bucket, key), ~self._live())
        )
        return await self._ctx.insert_unless_duplicate(insert(kv_entries).values(row))

    def _new_row(
        self, scope: KVScope, bucket: str, key: str, columns: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "namespace": scope.namespace,
            "owner": scope.owner,
            "bucket": bucket,
            "key": key,
            "revision": 1,
            "created_at": self._ctx.now,
            **columns,
        }

    async def _put_unconditionally(
        self, scope: KVScope, bucket: str, key: str, columns: dict[str, Any]
    ) -> int:
        conn = self._ctx.conn
        returning = conn.dialect.insert_returning
        params = self._upsert_parameters(self._new_row(scope, bucket, key, columns))
        if self._ctx.dialect == "mysql":
            updated = await conn.execute(
                _mysql_update_statement(), {k: v for k, v in params.items() if k != "p_revision"}
            )
            if updated.rowcount == 1:
                return int(updated.lastrowid)
            # A new key: the upsert below still settles a race with another creator.
        result = await self._ctx.execute(_put_statement(self._ctx.dialect, returning), params)
        if returning:
            return int(result.scalar_one())
        # MySQL has no RETURNING (MariaDB has, from 10.5); the transaction holds the row lock.
        found = await conn.execute(select(c.revision).where(self._the_key(scope, bucket, key)))
        return int(found.scalar_one())

    async def _get(self, scope: KVScope, bucket: str, key: str) -> KVEntry | None:
        params = {
            "p_namespace": scope.namespace,
            "p_owner": scope.owner,
            "p_bucket": bucket,
            "p_key": key,
            "p_now": self._ctx.now,
        }
        row = (await self._ctx.execute(_get_statement(), params)).first()
        return None if row is None else _entry(row)

    async def _delete(
        self, scope: KVScope, bucket: str, key: str, expected_revision: int | None
    ) -> bool:
        statement = delete(kv_entries).where(self._the_key(scope, bucket, key), self._live())
        await self._lock_owner(scope)
        if expected_revision is None:
            return (await self._ctx.conn.execute(statement)).rowcount > 0
        if expected_revision == 0:
            current = await self._live_revision(scope, bucket, key)
            if current != 0:
                raise _conflict(bucket, key, current, 0)
            return False
        removed = await self._ctx.conn.execute(statement.where(c.revision == expected_revision))
        if removed.rowcount != 1:
            current = await self._live_revision(scope, bucket, key)
            raise _conflict(bucket, key, current, expected_revision)
        return True

    async def _list_keys(
        self, scope: KVScope, bucket: str, prefix: str, limit: int, after: str | None
    ) -> KeyPage:
        statement = select(c.key).where(self._in_scope(scope), c.bucket == bucket, self._live())
        if prefix:
            statement = statement.where(_prefix_range(c.key, prefix))
        if after is not None:
            statement = statement.where(c.key > after)
        # One extra row tells whether another page follows.
        keys = list(
            (await self._ctx.conn.execute(statement.order_by(c.key).limit(limit + 1))).scalars()
        )
        page = keys[:limit]
        return KeyPage(keys=page, next_after=page[-1] if len(keys) > limit else None)

    async def _buckets(self, scope: KVScope) -> list[str]:
        found = await self._ctx.conn.execute(
            select(c.bucket)
            .distinct()
            .where(self._in_scope(scope), self._live())
            .order_by(c.bucket)
        )
        return list(found.scalars())

    async def _count(self, scope: KVScope, bucket_prefix: str) -> int:
        statement = select(func.count()).select_from(kv_entries)
        statement = statement.where(self._in_scope(scope), self._live())
        if bucket_prefix:
            statement = statement.where(_prefix_range(c.bucket, bucket_prefix))
        return int(await self._ctx.conn.scalar(statement) or 0)

    async def _entries(self, scope: KVScope) -> list[KVEntry]:
        rows = await self._ctx.conn.execute(
            select(kv_entries).where(self._in_scope(scope), self._live()).order_by(c.bucket, c.key)
        )
        return [_entry(row) for row in rows]

    async def _restore(self, scope: KVScope, entries: list[RestoredKV]) -> None:
        # A key given twice keeps its last entry, like repeated puts.
        rows = {
            (entry.bucket, entry.key): {
                "namespace": scope.namespace,
                "owner": scope.owner,
                "bucket": entry.bucket,
                "key": entry.key,
                "kind": entry.kind,
                "value": _payload(entry.payload),
                "revision": entry.revision,
                "created_at": entry.created_at,
                "updated_at": entry.updated_at,
                "expires_at": entry.expires_at,
            }
            for entry in entries
        }
        await self._lock_owner(scope)
        for chunk in chunked(list(rows)):
            await self._ctx.conn.execute(
                delete(kv_entries).where(self._in_scope(scope), tuple_(c.bucket, c.key).in_(chunk))
            )
        if rows:
            await self._ctx.conn.execute(insert(kv_entries), list(rows.values()))

    async def _clear(self, scope: KVScope, bucket_prefix: str) -> int:
        await self._lock_owner(scope)
        statement = delete(kv_entries).where(self._in_scope(scope))
        if bucket_prefix:
            statement = statement.where(_prefix_range(c.bucket, bucket_prefix))
        return (await self._ctx.conn.execute(statement)).rowcount

    async def _sweep_expired(self, now: datetime) -> int:
        removed = await self._ctx.conn.execute(
            delete(kv_entries).where(c.expires_at.is_not(None), c.expires_at <= now)
        )
        return removed.rowcount
