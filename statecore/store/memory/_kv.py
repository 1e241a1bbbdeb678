"""KV buckets with revisions and per-key TTL, in memory."""

from __future__ import annotations

from datetime import datetime, timedelta

from statecore.core._errors import RevisionConflictError
from statecore.core._models import (
    KeyPage,
    KVEntry,
    KVScope,
)
from statecore.store._inputs import KVPut, RestoredKV, decode_json
from statecore.store._kv_contract import KVStore
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

    async def _put(
        self, scope: KVScope, bucket: str, key: str, put: KVPut, expected_revision: int | None
    ) -> int:
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

    async def _get(self, scope: KVScope, bucket: str, key: str) -> KVEntry | None:
        row = self._live(scope).get((bucket, key))
        return None if row is None else _entry(bucket, key, row)

    async def _delete(
        self, scope: KVScope, bucket: str, key: str, expected_revision: int | None
    ) -> bool:
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

    async def _list_keys(
        self, scope: KVScope, bucket: str, prefix: str, limit: int, after: str | None
    ) -> KeyPage:
        keys = sorted(
            k
            for (b, k) in self._live(scope)
            if b == bucket and k.startswith(prefix) and (after is None or k > after)
        )
        page = keys[:limit]
        return KeyPage(keys=page, next_after=page[-1] if len(keys) > limit else None)

    async def _buckets(self, scope: KVScope) -> list[str]:
        return sorted({b for (b, _) in self._live(scope)})

    async def _count(self, scope: KVScope, bucket_prefix: str) -> int:
        return sum(1 for (b, _) in self._live(scope) if b.startswith(bucket_prefix))

    async def _entries(self, scope: KVScope) -> list[KVEntry]:
        live = self._live(scope)
        return [_entry(b, k, live[(b, k)]) for (b, k) in sorted(live)]

    async def _restore(self, scope: KVScope, entries: list[RestoredKV]) -> None:
        if not entries:
            return
        rows = self._writable(scope)
        for entry in entries:
            rows[(entry.bucket, entry.key)] = KVRow(
                kind=entry.kind,
                payload=entry.payload,
                revision=entry.revision,
                created_at=entry.created_at,
                updated_at=entry.updated_at,
                expires_at=entry.expires_at,
            )

    async def _clear(self, scope: KVScope, bucket_prefix: str) -> int:
        if self._ctx.ws.kv.get(_scope_key(scope)) is None:
            return 0
        rows = self._writable(scope)
        doomed = [k for k in rows if k[0].startswith(bucket_prefix)]
        for k in doomed:
            del rows[k]
        self._drop_if_empty(scope, rows)
        return len(doomed)

    async def _sweep_expired(self, now: datetime) -> int:
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
