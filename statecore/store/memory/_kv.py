"""KV buckets with revisions and per-key TTL, in memory."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from statecore.core._errors import InvalidInputError, RevisionConflictError
from statecore.core._models import (
    KeyPage,
    KVEntry,
    KVScope,
    validate_identifier,
    validate_key,
    validate_prefix,
)
from statecore.store._base import KVStore
from statecore.store._inputs import (
    check_aware,
    check_int,
    check_kv_key,
    check_page_limit,
    check_scope,
    checked_kv_put,
    decode_json,
    encode_kv_value,
    revalidate,
)
from statecore.store.memory._context import TxContext
from statecore.store.memory._schema import KVRow, ScopeKey


def _entry(bucket: str, key: str, row: KVRow) -> KVEntry:
    value = row.payload if row.kind == "bytes" else decode_json(row.payload)  # type: ignore[arg-type]
    return KVEntry(
        bucket=bucket,
        key=key,
        kind=row.kind,  # type: ignore[arg-type]
        value=value,
        revision=row.revision,
        created_at=row.created_at,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
    )


def _scope_key(scope: KVScope) -> ScopeKey:
    return (scope.namespace, scope.owner)


class MemoryKVStore(KVStore):
    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx

    def _live(self, scope: KVScope) -> dict[tuple[str, str], KVRow]:
        rows = self._ctx.ws.kv.get(_scope_key(scope)) or {}
        now = self._ctx.now
        return {k: row for k, row in rows.items() if row.live(now)}

    def _writable(self, scope: KVScope) -> dict[tuple[str, str], KVRow]:
        ws = self._ctx.ws
        rows = ws.kv.writable(_scope_key(scope))
        if rows is None:
            rows = {}
            ws.kv.put(_scope_key(scope), rows)
        return rows

    def _drop_if_empty(self, scope: KVScope, rows: dict[tuple[str, str], KVRow]) -> None:
        # An empty scope is no scope: namespaces() must not report it.
        if not rows:
            self._ctx.ws.kv.delete(_scope_key(scope))

    async def put(
        self,
        scope: KVScope,
        bucket: str,
        key: str,
        value: Any,
        *,
        expected_revision: int | None = None,
        ttl_seconds: float | None = None,
    ) -> int:
        put = checked_kv_put(scope, bucket, key, value, expected_revision, ttl_seconds)
        kind, payload, ttl_seconds = put.kind, put.payload, put.ttl_seconds
        now = self._ctx.now
        current = self._live(scope).get((bucket, key))
        current_revision = current.revision if current else 0
        if expected_revision is not None and expected_revision != current_revision:
            raise RevisionConflictError(
                f"{bucket}/{key} is at revision {current_revision}, not {expected_revision}; "
                "read it again and retry",
                current=current_revision,
                expected=expected_revision,
            )
        rows = self._writable(scope)
        rows[(bucket, key)] = KVRow(
            kind=kind,
            payload=payload,
            revision=current_revision + 1,
            created_at=current.created_at if current else now,
            updated_at=now,
            expires_at=None if ttl_seconds is None else now + timedelta(seconds=ttl_seconds),
        )
        return current_revision + 1

    async def get(self, scope: KVScope, bucket: str, key: str) -> KVEntry | None:
        check_kv_key(scope, bucket, key)
        row = self._live(scope).get((bucket, key))
        return None if row is None else _entry(bucket, key, row)

    async def delete(
        self, scope: KVScope, bucket: str, key: str, *, expected_revision: int | None = None
    ) -> bool:
        check_kv_key(scope, bucket, key)
        if expected_revision is not None:
            check_int(expected_revision, "expected_revision")
        current = self._live(scope).get((bucket, key))
        current_revision = current.revision if current else 0
        if expected_revision is not None and expected_revision != current_revision:
            raise RevisionConflictError(
                f"{bucket}/{key} is at revision {current_revision}, not {expected_revision}; "
                "read it again and retry",
                current=current_revision,
                expected=expected_revision,
            )
        if current is None:
            return False
        rows = self._writable(scope)
        del rows[(bucket, key)]
        self._drop_if_empty(scope, rows)
        return True

    async def list_keys(
        self,
        scope: KVScope,
        bucket: str,
        prefix: str = "",
        *,
        limit: int = 100,
        after: str | None = None,
    ) -> KeyPage:
        check_scope(scope)
        validate_identifier(bucket, "bucket")
        validate_prefix(prefix)
        check_page_limit(limit)
        if after is not None:
            validate_key(after)
        keys = sorted(
            k
            for (b, k) in self._live(scope)
            if b == bucket and k.startswith(prefix) and (after is None or k > after)
        )
        page = keys[:limit]
        return KeyPage(keys=page, next_after=page[-1] if len(keys) > limit else None)

    async def buckets(self, scope: KVScope) -> list[str]:
        check_scope(scope)
        return sorted({b for (b, _) in self._live(scope)})

    async def count(self, scope: KVScope, bucket_prefix: str = "") -> int:
        check_scope(scope)
        validate_prefix(bucket_prefix)
        return sum(1 for (b, _) in self._live(scope) if b.startswith(bucket_prefix))

    async def entries(self, scope: KVScope) -> list[KVEntry]:
        check_scope(scope)
        live = self._live(scope)
        return [_entry(b, k, live[(b, k)]) for (b, k) in sorted(live)]

    async def restore(self, scope: KVScope, entries: Sequence[KVEntry]) -> None:
        check_scope(scope)
        rows_in: list[tuple[tuple[str, str], KVRow]] = []
        for item in entries:
            entry = revalidate(KVEntry, item, "KV entry")
            validate_identifier(entry.bucket, "bucket")
            validate_key(entry.key)
            kind, payload = encode_kv_value(entry.value)
            if kind != entry.kind:
                raise InvalidInputError(
                    f"KV entry {entry.bucket}/{entry.key} says kind {entry.kind!r} but its "
                    "value is not of that kind"
                )
            expires = entry.expires_at
            rows_in.append(
                (
                    (entry.bucket, entry.key),
                    KVRow(
                        kind=kind,
                        payload=payload,
                        revision=entry.revision,
                        created_at=check_aware(entry.created_at, "created_at"),
                        updated_at=check_aware(entry.updated_at, "updated_at"),
                        expires_at=None if expires is None else check_aware(expires, "expires_at"),
                    ),
                )
            )
        if not rows_in:
            return
        rows = self._writable(scope)
        rows.update(rows_in)

    async def clear(self, scope: KVScope, bucket_prefix: str = "") -> int:
        check_scope(scope)
        validate_prefix(bucket_prefix)
        if self._ctx.ws.kv.get(_scope_key(scope)) is None:
            return 0
        rows = self._writable(scope)
        doomed = [k for k in rows if k[0].startswith(bucket_prefix)]
        for k in doomed:
            del rows[k]
        self._drop_if_empty(scope, rows)
        return len(doomed)

    async def sweep_expired(self, now: datetime) -> int:
        now = check_aware(now, "now")
        ws = self._ctx.ws
        stale_scopes = [
            key for key, rows in ws.kv.items() if any(not r.live(now) for r in rows.values())
        ]
        swept = 0
        for key in stale_scopes:
            rows = ws.kv.writable(key) or {}
            doomed = [k for k, r in rows.items() if not r.live(now)]
            for k in doomed:
                del rows[k]
            swept += len(doomed)
            if not rows:
                ws.kv.delete(key)
        return swept
