"""KV put and get through the storage contract, next to the statement a person would write by
hand for the same job, run on the same engine (same driver, pool and BEGIN) and interleaved.

The hand-written put is one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING revision``; the
hand-written get is one ``SELECT`` of the live row followed by ``json.loads`` of its value.
Both are sent with ``exec_driver_sql`` (no SQL compilation), each in its own transaction, as
the contract's calls are. The contract does more for its time: input validation, TTL
semantics (an expired key restarts at revision 1), a typed ``KVEntry`` result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from statecore.core._models import KVScope
from statecore.store.sql import SqlStateStore

BUCKET = "bench"
API_KEY = "prefs-api"
RAW_KEY = "prefs-raw"
VALUE = {
    "theme": "dark",
    "language": "en",
    "recent_files": [f"notes/{i}.md" for i in range(6)],
    "limits": {"max_tokens": 4096, "temperature": 0.2},
}

_PUT = (
    "INSERT INTO statecore_kv_entries (namespace, owner, bucket, key, kind, value, revision, "
    "created_at, updated_at, expires_at) "
    "VALUES ({1}, {2}, {3}, {4}, 'json', {5}, 1, {6}, {6}, NULL) "
    "ON CONFLICT (namespace, owner, bucket, key) DO UPDATE SET kind = excluded.kind, "
    "value = excluded.value, revision = statecore_kv_entries.revision + 1, "
    "updated_at = excluded.updated_at, expires_at = NULL RETURNING revision"
)
_GET = (
    "SELECT kind, value, revision, created_at, updated_at, expires_at "
    "FROM statecore_kv_entries "
    "WHERE namespace = {1} AND owner = {2} AND bucket = {3} AND key = {4} "
    "AND (expires_at IS NULL OR expires_at > {5})"
)


# MariaDB/MySQL: KEY is reserved, there is no ON CONFLICT, and an upsert hands the new
# revision back through LAST_INSERT_ID (its rowcount is 1 for an insert, 2 for an update).
_PUT_MYSQL = (
    "INSERT INTO statecore_kv_entries (namespace, owner, bucket, `key`, kind, value, revision, "
    "created_at, updated_at, expires_at) "
    "VALUES (%s, %s, %s, %s, 'json', %s, 1, %s, %s, NULL) "
    "ON DUPLICATE KEY UPDATE kind = VALUES(kind), value = VALUES(value), "
    "revision = LAST_INSERT_ID(revision + 1), updated_at = VALUES(updated_at), expires_at = NULL"
)
_GET_MYSQL = (
    "SELECT kind, value, revision, created_at, updated_at, expires_at "
    "FROM statecore_kv_entries "
    "WHERE namespace = %s AND owner = %s AND bucket = %s AND `key` = %s "
    "AND (expires_at IS NULL OR expires_at > %s)"
)


def _placeholders(sql: str, dialect: str) -> str:
    # Numbered parameters, which both drivers accept: SQLite ?N, asyncpg $N.
    mark = "$" if dialect == "postgresql" else "?"
    return sql.format(*([""] + [f"{mark}{n}" for n in range(1, 10)]))


class RawKV:
    """The hand-written statements, bound to a store's engine."""

    def __init__(self, store: SqlStateStore, scope: KVScope) -> None:
        self._engine = store.engine
        self._dialect = store.dialect
        self._scope = scope
        mysql = store.dialect == "mysql"
        self._put = _PUT_MYSQL if mysql else _placeholders(_PUT, store.dialect)
        self._get = _GET_MYSQL if mysql else _placeholders(_GET, store.dialect)

    def _now(self) -> Any:
        now = datetime.now(UTC)
        # SQLite keeps naive UTC text (the backend's own format); PostgreSQL a timestamptz;
        # MariaDB a naive UTC DATETIME(6).
        if self._dialect == "postgresql":
            return now
        naive = now.replace(tzinfo=None)
        return naive if self._dialect == "mysql" else naive.isoformat(" ")

    async def put(self, key: str, value: Any) -> int:
        payload = json.dumps(value, separators=(",", ":")).encode()
        now = self._now()
        params: tuple[Any, ...] = (self._scope.namespace, self._scope.owner, BUCKET, key, payload)
        async with self._engine.begin() as conn:
            if self._dialect == "mysql":
                done = await conn.exec_driver_sql(self._put, (*params, now, now))
                return int(done.lastrowid) if done.rowcount == 2 else 1
            return int((await conn.exec_driver_sql(self._put, (*params, now))).scalar_one())

    async def get(self, key: str) -> Any:
        params = (self._scope.namespace, self._scope.owner, BUCKET, key, self._now())
        async with self._engine.begin() as conn:
            row = (await conn.exec_driver_sql(self._get, params)).first()
        return None if row is None else json.loads(bytes(row.value))


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of one call."""
    cpu, start = time.process_time(), time.perf_counter()
    await call()
    return time.perf_counter() - start, time.process_time() - cpu


async def run_kv(
    store: SqlStateStore, scope: KVScope, iterations: int, warmup: int
) -> dict[str, tuple[list[float], float]]:
    """Latencies (seconds) and total CPU seconds of ``iterations`` contract and hand-written
    puts and gets, each pair run back to back in alternating order so both see the same
    machine."""
    raw = RawKV(store, scope)

    async def api_put() -> None:
        async with store.transaction() as tx:
            await tx.kv.put(scope, BUCKET, API_KEY, VALUE)

    async def api_get() -> None:
        async with store.transaction() as tx:
            entry = await tx.kv.get(scope, BUCKET, API_KEY)
        assert entry is not None and entry.value == VALUE

    async def raw_put() -> None:
        await raw.put(RAW_KEY, VALUE)

    async def raw_get() -> None:
        assert await raw.get(RAW_KEY) == VALUE

    names = ("api_put", "raw_put", "api_get", "raw_get")
    latencies: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, float] = dict.fromkeys(names, 0.0)
    for op in ("put", "get"):
        api = api_put if op == "put" else api_get
        hand = raw_put if op == "put" else raw_get
        for i in range(warmup + iterations):
            pair = [("api", api), ("raw", hand)]
            if i % 2:
                pair.reverse()
            for name, call in pair:
                took, cpu_took = await _timed(call)
                if i >= warmup:
                    latencies[f"{name}_{op}"].append(took)
                    cpu[f"{name}_{op}"] += cpu_took
    # Both ways wrote the same kind of row: the contract reads the hand-written one back.
    async with store.transaction() as tx:
        written = await tx.kv.get(scope, BUCKET, RAW_KEY)
        api_written = await tx.kv.get(scope, BUCKET, API_KEY)
    assert written is not None and written.value == VALUE
    assert api_written is not None and written.revision == api_written.revision
    return {name: (latencies[name], cpu[name]) for name in names}
