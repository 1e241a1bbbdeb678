"""The storage contract's KV buckets: keys to bytes or JSON with a revision per write and a
per-key TTL. Arguments are checked here, once for every backend; a backend implements the
``_``-prefixed methods."""

from __future__ import annotations

import abc
import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from statecore.core._models import (
    KeyPage,
    KVEntry,
    KVScope,
    validate_identifier,
    validate_key,
    validate_prefix,
)
from statecore.store import _change_rules as changes
from statecore.store._change_ledger import RecordsChanges
from statecore.store._inputs import (
    KVPut,
    RestoredKV,
    check_aware,
    check_int,
    check_kv_key,
    check_page_limit,
    check_scope,
    checked_kv_entries,
    checked_kv_put,
)


class KVStore(RecordsChanges, abc.ABC, changes=changes.KV):
    """Buckets of keys -> bytes or JSON, with a revision per write.

    Every method checks its arguments here, once for every backend; a backend implements the
    ``_`` method beside it, which receives them checked."""

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
        """Write and return the new revision (1 for a new key, then +1 per write).

        ``value`` is bytes (stored as bytes) or any JSON value. ``expected_revision`` makes the
        write conditional: the current revision must equal it (0 means "must not exist"),
        else RevisionConflictError and nothing is written. An expired key counts as absent.
        """
        put = checked_kv_put(scope, bucket, key, value, expected_revision, ttl_seconds)
        return await self._put(scope, bucket, key, put, expected_revision)

    @abc.abstractmethod
    async def _put(
        self, scope: KVScope, bucket: str, key: str, put: KVPut, expected_revision: int | None
    ) -> int:
        """``put``: the value encoded in ``put``, with its TTL."""

    async def get(self, scope: KVScope, bucket: str, key: str) -> KVEntry | None:
        check_kv_key(scope, bucket, key)
        return await self._get(scope, bucket, key)

    @abc.abstractmethod
    async def _get(self, scope: KVScope, bucket: str, key: str) -> KVEntry | None: ...

    async def delete(
        self, scope: KVScope, bucket: str, key: str, *, expected_revision: int | None = None
    ) -> bool:
        check_kv_key(scope, bucket, key)
        if expected_revision is not None:
            check_int(expected_revision, "expected_revision")
        return await self._delete(scope, bucket, key, expected_revision)

    @abc.abstractmethod
    async def _delete(
        self, scope: KVScope, bucket: str, key: str, expected_revision: int | None
    ) -> bool: ...

    async def list_keys(
        self,
        scope: KVScope,
        bucket: str,
        prefix: str = "",
        *,
        limit: int = 100,
        after: str | None = None,
    ) -> KeyPage:
        """Live keys starting with ``prefix`` in ascending order, ``limit`` per page (1..1000),
        continuing after key ``after``. The prefix is matched literally (no wildcards)."""
        check_scope(scope)
        validate_identifier(bucket, "bucket")
        validate_prefix(prefix)
        check_page_limit(limit)
        if after is not None:
            validate_key(after)
        return await self._list_keys(scope, bucket, prefix, limit, after)

    @abc.abstractmethod
    async def _list_keys(
        self, scope: KVScope, bucket: str, prefix: str, limit: int, after: str | None
    ) -> KeyPage: ...

    async def buckets(self, scope: KVScope) -> builtins.list[str]:
        check_scope(scope)
        return await self._buckets(scope)

    @abc.abstractmethod
    async def _buckets(self, scope: KVScope) -> builtins.list[str]: ...

    async def count(self, scope: KVScope, bucket_prefix: str = "") -> int:
        """Live keys of the scope in buckets starting with ``bucket_prefix``."""
        check_scope(scope)
        validate_prefix(bucket_prefix)
        return await self._count(scope, bucket_prefix)

    @abc.abstractmethod
    async def _count(self, scope: KVScope, bucket_prefix: str) -> int: ...

    async def entries(self, scope: KVScope) -> builtins.list[KVEntry]:
        """Every live entry of the scope (export)."""
        check_scope(scope)
        return await self._entries(scope)

    @abc.abstractmethod
    async def _entries(self, scope: KVScope) -> builtins.list[KVEntry]: ...

    async def restore(self, scope: KVScope, entries: Sequence[KVEntry]) -> None:
        """Write exported entries verbatim, revisions and timestamps included. A key given
        twice keeps its last entry, like repeated puts."""
        check_scope(scope)
        await self._restore(scope, checked_kv_entries(entries))

    @abc.abstractmethod
    async def _restore(self, scope: KVScope, entries: builtins.list[RestoredKV]) -> None: ...

    async def clear(self, scope: KVScope, bucket_prefix: str = "") -> int:
        """Delete the scope's keys in buckets starting with ``bucket_prefix``; returns count."""
        check_scope(scope)
        validate_prefix(bucket_prefix)
        return await self._clear(scope, bucket_prefix)

    @abc.abstractmethod
    async def _clear(self, scope: KVScope, bucket_prefix: str) -> int: ...

    async def sweep_expired(self, now: datetime) -> int:
        """Delete keys whose TTL has passed, in every scope; returns how many."""
        return await self._sweep_expired(check_aware(now, "now"))

    @abc.abstractmethod
    async def _sweep_expired(self, now: datetime) -> int: ...
