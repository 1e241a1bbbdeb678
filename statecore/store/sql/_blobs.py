"""Payloads stored by reference: the ``statecore_blobs`` and ``statecore_blob_refs`` tables.

A blob is the bytes of one Temporal payload (after the user's codec), keyed by their SHA-256
and written once: storing the same bytes again writes only a reference. A reference names the
workflow (or standalone activity) the payload was stored for, which is the history that may
hold its claim; the sweep reads them to find blobs no history can reference any more.

This module is plain SQL; what decides that a workflow's history is gone is the Temporal
side's (``statecore.temporal._blob_driver``), which hands the sweep the targets it found gone.

Every operation is one transaction. A store that dies half way (a killed worker) leaves
nothing; a store racing the sweep either finds the blob and references it (the sweep's
DELETE then fails on the foreign key and keeps it) or finds it gone and writes it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from statecore.core._errors import BlobStoreUnavailableError, BlobTooLargeError
from statecore.core._limits import MAX_BLOB_BYTES
from statecore.store._retry import retry_pause
from statecore.store.sql._engine import READ_ONLY_OPTION, create_store_engine, dialect_name
from statecore.store.sql._schema import blob_refs, blobs
from statecore.store.sql._transient import is_transient_conflict
from statecore.store.sql._upsert import insert_or_ignore, upsert

log = logging.getLogger("statecore.blobs")

#: Runs of one store or delete transaction: a lost deadlock, or a race with the sweep that
#: deleted the blob between our look and our reference, is run again this many times in all.
STORE_ATTEMPTS = 5
#: Room a MariaDB statement needs besides the blob's bytes (the other columns, the SQL).
PACKET_OVERHEAD_BYTES = 64 * 1024

#: Target kinds a reference may have.
WORKFLOW = "workflow"
ACTIVITY = "activity"
NO_TARGET = "none"


@dataclass(frozen=True)
class BlobTarget:
    """Whose history a payload was stored for: a workflow run, a standalone activity, or
    nobody known (``kind="none"``, a client call with no workflow)."""

    kind: str
    namespace: str = ""
    target_id: str = ""
    run_id: str = ""

    @property
    def key(self) -> str:
        joined = "\x00".join((self.kind, self.namespace, self.target_id, self.run_id))
        return hashlib.sha256(joined.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredBlob:
    """A blob as read back: how its bytes are kept (``"raw"`` or ``"zlib"``) and them."""

    digest: str
    encoding: str
    size: int
    data: bytes


@dataclass(frozen=True)
class BlobUsage:
    """The blobs stored for one target: how many, their payload bytes and stored bytes
    (after compression; a blob shared by two targets counts for both)."""

    target: BlobTarget
    blobs: int
    size: int
    stored_size: int
    last_stored_at: datetime


@dataclass(frozen=True)
class SweepCandidate:
    """A target with references older than the grace period, for the sweep to check."""

    target: BlobTarget
    blobs: int


def _unavailable(
    action: str, engine: AsyncEngine, error: BaseException
) -> BlobStoreUnavailableError:
    reason = (str(error).strip().splitlines() or [""])[0] or type(error).__name__
    url = engine.url
    where = f"{url.get_backend_name()}://{url.host or ''}{f':{url.port}' if url.port else ''}"
    return BlobStoreUnavailableError(
        f"the database ({where}/{url.database or ''}) did not answer while {action}: {reason}. "
        "Nothing was lost; the workflow task or activity is retried"
    )


def _is_unreachable(error: BaseException) -> bool:
    """A refused, reset or silent connection, as opposed to a statement the server refused."""
    if isinstance(error, OSError | TimeoutError | InterfaceError):
        return True
    if isinstance(error, OperationalError):
        return True
    return isinstance(error, DBAPIError) and error.connection_invalidated


class BlobTable:
    """The blob tables of one database, on an engine of its own (or a given one)."""

    def __init__(self, engine: AsyncEngine, *, owns_engine: bool = True) -> None:
        self.engine = engine
        self.dialect = dialect_name(engine.url)
        self._owns_engine = owns_engine
        self._max_packet: int | None = None
        self._packet_lock = asyncio.Lock()

    @classmethod
    def open(cls, url: str) -> BlobTable:
        """A table on a new engine for ``url``; no connection is made until first use."""
        return cls(create_store_engine(url))

    async def close(self) -> None:
        if self._owns_engine:
            await self.engine.dispose()

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[AsyncConnection]:
        # Read-only: on SQLite a deferred BEGIN on a WAL snapshot, never the write lock.
        async with self.engine.connect() as conn:
            yield await conn.execution_options(**{READ_ONLY_OPTION: True})

    # --- storing ---------------------------------------------------------------------------

    async def put(
        self,
        digest: str,
        *,
        encoding: str,
        size: int,
        data: bytes | None,
        targets: Sequence[BlobTarget],
        now: datetime | None = None,
    ) -> bool:
        """Store a blob unless it is there already, and reference it from ``targets``; one
        transaction. ``data=None`` only references a blob believed stored: then False means
        it is not (nothing was written; call again with its bytes), True that it is
        referenced.

        Raises:
            BlobTooLargeError: over ``MAX_BLOB_BYTES`` or MariaDB's ``max_allowed_packet``.
            BlobStoreUnavailableError: the database did not answer (nothing was written).
        """
        if size > MAX_BLOB_BYTES:
            raise BlobTooLargeError(
                f"a payload of {size:,} bytes is over the {MAX_BLOB_BYTES:,}-byte limit of one "
                f"stored payload (blob {digest})"
            )
        for attempt in range(1, STORE_ATTEMPTS + 1):
            try:
                async with self.engine.begin() as conn:
                    return await self._put(conn, digest, encoding, size, data, targets, now)
            except IntegrityError:
                # The sweep deleted the blob between our look and our reference: look again.
                if attempt == STORE_ATTEMPTS:
                    raise
            except DBAPIError as error:
                if is_transient_conflict(error, self.dialect) and attempt < STORE_ATTEMPTS:
                    await asyncio.sleep(retry_pause(attempt))
                    continue
                if _is_unreachable(error):
                    raise _unavailable(f"storing blob {digest}", self.engine, error) from error
                raise
            except (OSError, TimeoutError) as error:
                raise _unavailable(f"storing blob {digest}", self.engine, error) from error
        raise AssertionError("unreachable")  # pragma: no cover

    async def _put(
        self,
        conn: AsyncConnection,
        digest: str,
        encoding: str,
        size: int,
        data: bytes | None,
        targets: Sequence[BlobTarget],
        now: datetime | None,
    ) -> bool:
        when = now or datetime.now(UTC)
        found = await conn.scalar(select(blobs.c.digest).where(blobs.c.digest == digest))
        if found is None:
            if data is None:
                return False
            await self._check_packet(conn, digest, len(data))
            row = {
                "digest": digest,
                "encoding": encoding,
                "size": size,
                "stored_size": len(data),
                "data": data,
                "created_at": when,
            }
            await conn.execute(insert_or_ignore(self.dialect, blobs, row, ["digest"]))
        for target in {t.key: t for t in targets}.values():
            ref = {
                "digest": digest,
                "target_key": target.key,
                "kind": target.kind,
                "namespace": target.namespace,
                "target_id": target.target_id,
                "run_id": target.run_id,
                "first_stored_at": when,
                "last_stored_at": when,
            }
            await conn.execute(
                upsert(
                    self.dialect,
                    blob_refs,
                    ref,
                    ["digest", "target_key"],
                    lambda proposed: [("last_stored_at", proposed.last_stored_at)],
                )
            )
        return True

    async def _check_packet(self, conn: AsyncConnection, digest: str, stored: int) -> None:
        if self.dialect != "mysql":
            return
        async with self._packet_lock:
            if self._max_packet is None:
                self._max_packet = int(await conn.scalar(text("SELECT @@max_allowed_packet")))
        if stored + PACKET_OVERHEAD_BYTES > self._max_packet:
            raise BlobTooLargeError(
                f"blob {digest} is {stored:,} bytes stored; the MariaDB/MySQL server takes at "
                f"most {self._max_packet:,} bytes in one statement (max_allowed_packet). Set "
                "max_allowed_packet to 64M or more on the server"
            )

    # --- reading ---------------------------------------------------------------------------

    async def has(self, digest: str) -> bool:
        """Whether a blob with ``digest`` is stored (a store then skips compressing it)."""
        try:
            async with self._reading() as conn:
                found = await conn.scalar(select(blobs.c.digest).where(blobs.c.digest == digest))
        except (DBAPIError, OSError, TimeoutError) as error:
            if isinstance(error, DBAPIError) and not _is_unreachable(error):
                raise
            raise _unavailable(f"looking up blob {digest}", self.engine, error) from error
        return found is not None

    async def targets_of(self, digest: str) -> list[BlobTarget]:
        """The targets a blob was stored for (to name them when it is found corrupt)."""
        ref = blob_refs.c
        async with self._reading() as conn:
            rows = (
                await conn.execute(
                    select(ref.kind, ref.namespace, ref.target_id, ref.run_id).where(
                        ref.digest == digest
                    )
                )
            ).all()
        return [BlobTarget(str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    async def get(self, digest: str) -> StoredBlob | None:
        """The blob with ``digest``, or None when there is none.

        Raises:
            BlobStoreUnavailableError: the database did not answer.
        """
        try:
            async with self._reading() as conn:
                row = (
                    await conn.execute(
                        select(blobs.c.encoding, blobs.c.size, blobs.c.data).where(
                            blobs.c.digest == digest
                        )
                    )
                ).first()
        except (DBAPIError, OSError, TimeoutError) as error:
            if isinstance(error, DBAPIError) and not _is_unreachable(error):
                raise
            raise _unavailable(f"reading blob {digest}", self.engine, error) from error
        if row is None:
            return None
        return StoredBlob(digest, str(row.encoding), int(row.size), bytes(row.data))

    async def usage(self) -> list[BlobUsage]:
        """Blob usage per target, the largest first."""
        ref, blob = blob_refs.c, blobs.c
        query = (
            select(
                ref.kind,
                ref.namespace,
                ref.target_id,
                ref.run_id,
                func.count().label("n"),
                func.coalesce(func.sum(blob.size), 0).label("size"),
                func.coalesce(func.sum(blob.stored_size), 0).label("stored"),
                func.max(ref.last_stored_at).label("last"),
            )
            .join(blobs, blob.digest == ref.digest)
            .group_by(ref.kind, ref.namespace, ref.target_id, ref.run_id)
            .order_by(func.coalesce(func.sum(blob.stored_size), 0).desc())
        )
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        return [
            BlobUsage(
                BlobTarget(str(r.kind), str(r.namespace), str(r.target_id), str(r.run_id)),
                int(r.n),
                int(r.size),
                int(r.stored),
                _aware(r.last),
            )
            for r in rows
        ]

    async def totals(self) -> tuple[int, int, int]:
        """(blobs, payload bytes, stored bytes) of the whole table."""
        async with self._reading() as conn:
            row = (
                await conn.execute(
                    select(
                        func.count(),
                        func.coalesce(func.sum(blobs.c.size), 0),
                        func.coalesce(func.sum(blobs.c.stored_size), 0),
                    )
                )
            ).one()
        return int(row[0]), int(row[1]), int(row[2])

    # --- the sweep -------------------------------------------------------------------------

    async def sweep_candidates(self, *, older_than: datetime) -> list[SweepCandidate]:
        """Targets of kind ``workflow`` none of whose references was written since
        ``older_than``: the ones the sweep asks Temporal about."""
        ref = blob_refs.c
        query = (
            select(
                ref.kind,
                ref.namespace,
                ref.target_id,
                ref.run_id,
                func.count().label("n"),
                func.max(ref.last_stored_at).label("last"),
            )
            .where(ref.kind == WORKFLOW)
            .group_by(ref.kind, ref.namespace, ref.target_id, ref.run_id)
        )
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        return [
            SweepCandidate(
                BlobTarget(str(r.kind), str(r.namespace), str(r.target_id), str(r.run_id)),
                int(r.n),
            )
            for r in rows
            if _aware(r.last) < older_than
        ]

    async def forget(self, targets: Sequence[BlobTarget], *, older_than: datetime) -> int:
        """Delete the references of ``targets`` (their histories are gone) that were not
        written again since ``older_than``; how many were deleted."""
        removed = 0
        for target in targets:
            async with self.engine.begin() as conn:
                result = await conn.execute(
                    delete(blob_refs).where(
                        blob_refs.c.target_key == target.key,
                        blob_refs.c.last_stored_at < older_than,
                    )
                )
                removed += int(result.rowcount or 0)
        return removed

    async def delete_unreferenced(self, *, older_than: datetime) -> tuple[int, int]:
        """Delete blobs created before ``older_than`` that no reference names, one at a time;
        (blobs deleted, stored bytes freed). A blob that gains a reference meanwhile stays:
        its DELETE fails on the foreign key, or finds the reference and deletes nothing."""
        orphans = (
            select(blobs.c.digest, blobs.c.stored_size)
            .where(
                blobs.c.created_at < older_than,
                ~select(blob_refs.c.digest).where(blob_refs.c.digest == blobs.c.digest).exists(),
            )
            .order_by(blobs.c.digest)
        )
        async with self._reading() as conn:
            found = (await conn.execute(orphans)).all()
        deleted = freed = 0
        for digest, stored in found:
            try:
                async with self.engine.begin() as conn:
                    result = await conn.execute(
                        delete(blobs).where(
                            blobs.c.digest == digest,
                            ~select(blob_refs.c.digest)
                            .where(blob_refs.c.digest == digest)
                            .exists(),
                        )
                    )
            except IntegrityError:
                log.info("blob %s gained a reference while the sweep ran; kept", digest)
                continue
            except DBAPIError as error:
                if is_transient_conflict(error, self.dialect):
                    log.info("blob %s: the sweep lost a conflict; kept for the next", digest)
                    continue
                raise
            if result.rowcount:
                deleted += 1
                freed += int(stored)
        return deleted, freed


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def grace_cutoff(now: datetime, grace_seconds: float) -> datetime:
    return now - timedelta(seconds=grace_seconds)
