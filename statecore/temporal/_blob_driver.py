"""Temporal's external storage on statecore's database: large payloads by reference.

temporalio's ``ExternalStorage`` (experimental) hands payloads over a size threshold to a
``StorageDriver`` and keeps only the driver's claim in history. ``StatecoreBlobDriver`` keeps
them in statecore's SQL database (SQLite, PostgreSQL, MariaDB), which every worker and client
of a statecore deployment already reaches:

- content-addressed: a blob is keyed by the SHA-256 of the payload's bytes, written once, and
  storing the same bytes again writes only a reference;
- compressed with zlib when that saves at least ``BLOB_MIN_COMPRESSION_SAVING``;
- stored after the codec: temporalio encodes a payload with the data converter's codec first
  and only then offers it to external storage, so with ``EncryptionCodec`` on, the blob table
  holds ciphertext;
- each store references the workflow run it was stored for (the history that holds the
  claim), which is what the sweep (``sweep_blobs``) reads.

``with_blob_storage`` adds the driver to a data converter, keeping any external storage the
user configured (their drivers keep their claims and their choice of payloads).
``StatecoreBlobPlugin`` does that for any client and worker, statecore's or not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import zlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverActivityInfo,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverSelectContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)
from temporalio.plugin import SimplePlugin
from temporalio.service import RPCError, RPCStatusCode

from statecore.core._errors import BlobCorruptError, BlobMissingError, InvalidInputError
from statecore.core._limits import (
    BLOB_MIN_COMPRESSION_SAVING,
    BLOB_SWEEP_GRACE_SECONDS,
    DEFAULT_BLOB_THRESHOLD_BYTES,
)
from statecore.store.sql._blobs import (
    ACTIVITY,
    NO_TARGET,
    WORKFLOW,
    BlobTable,
    BlobTarget,
    grace_cutoff,
)
from statecore.store.sql._engine import is_sqlite_memory

#: The driver's name in claims. Histories keep it: it never changes.
DRIVER_NAME = "statecore.sql"
#: Payloads at least this large are hashed and compressed on a thread, off the event loop
#: that runs the worker's workflow activations.
THREAD_OFFLOAD_BYTES = 1024 * 1024
#: zlib's level: 3 keeps most of level 6's saving on JSON at about half its time.
ZLIB_LEVEL = 3


def _target(context: StorageDriverStoreContext) -> BlobTarget:
    target = context.target
    if isinstance(target, StorageDriverWorkflowInfo):
        return BlobTarget(WORKFLOW, target.namespace, target.id or "", target.run_id or "")
    if isinstance(target, StorageDriverActivityInfo):
        return BlobTarget(ACTIVITY, target.namespace, target.id or "", target.run_id or "")
    return BlobTarget(NO_TARGET)


def _pack(raw: bytes) -> tuple[str, bytes]:
    packed = zlib.compress(raw, ZLIB_LEVEL)
    if len(packed) <= len(raw) * (1 - BLOB_MIN_COMPRESSION_SAVING):
        return "zlib", packed
    return "raw", raw


def _unpack(encoding: str, data: bytes) -> bytes:
    if encoding == "zlib":
        return zlib.decompress(data)
    if encoding == "raw":
        return data
    raise ValueError(f"unknown blob encoding {encoding!r}")


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


async def _off_loop(function: Any, *args: Any) -> Any:
    size = len(args[0]) if args and isinstance(args[0], bytes | bytearray) else 0
    if size >= THREAD_OFFLOAD_BYTES:
        return await asyncio.to_thread(function, *args)
    return function(*args)


def _claim_owner(claim: StorageDriverClaim) -> str:
    data = claim.claim_data
    workflow = data.get("workflow_id")
    if workflow:
        run = data.get("run_id")
        return f"workflow {workflow!r}" + (f" (run {run})" if run else "")
    return "no workflow recorded in the claim"


class StatecoreBlobDriver(StorageDriver):
    """A ``StorageDriver`` on statecore's database.

    Args:
        database_url: the database (``sqlite+aiosqlite:///path``, ``postgresql+asyncpg://...``,
            ``mysql+asyncmy://...``); its schema must be migrated (a worker with
            ``StatecorePlugin`` or ``StatecoreBlobPlugin`` does it when it starts).
        table: an open ``BlobTable`` to use instead (tests, or an engine shared with a store).
    """

    def __init__(self, database_url: str | None = None, *, table: BlobTable | None = None) -> None:
        if (database_url is None) == (table is None):
            raise ValueError("pass exactly one of database_url= or table=")
        if database_url is not None and (
            database_url.strip().lower().startswith("memory") or is_sqlite_memory(database_url)
        ):
            raise InvalidInputError(
                "payloads stored by reference need a SQL database every worker and client "
                "reaches; memory:// and in-memory SQLite are one process's"
            )
        self.table = table if table is not None else BlobTable.open(str(database_url))

    def name(self) -> str:
        return DRIVER_NAME

    def type(self) -> str:
        return DRIVER_NAME

    async def close(self) -> None:
        """Close the database connections (they reopen on the next use)."""
        await self.table.close()

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        target = _target(context)
        claims = []
        for payload in payloads:
            raw = payload.SerializeToString()
            digest = await _off_loop(_digest, raw)
            # Stored already (the common case for a document read turn after turn): only a
            # reference is written, and the bytes are neither compressed nor sent.
            referenced = await self.table.put(
                digest, encoding="raw", size=len(raw), data=None, targets=[target]
            )
            if not referenced:
                encoding, data = await _off_loop(_pack, raw)
                await self.table.put(
                    digest, encoding=encoding, size=len(raw), data=data, targets=[target]
                )
            claim: dict[str, str] = {"digest": digest, "size": str(len(raw))}
            if target.kind == WORKFLOW:
                claim["workflow_id"] = target.target_id
                if target.run_id:
                    claim["run_id"] = target.run_id
            claims.append(StorageDriverClaim(claim_data=claim))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        payloads = []
        for claim in claims:
            digest = claim.claim_data.get("digest", "")
            blob = await self.table.get(digest)
            if blob is None:
                raise BlobMissingError(
                    f"the payload claim {digest} ({_claim_owner(claim)}) names a blob that "
                    "statecore's database does not hold: deleted by hand, or this worker "
                    "reads another database than the one that stored it",
                    digest=digest,
                    workflow_id=claim.claim_data.get("workflow_id", ""),
                )
            try:
                raw = await _off_loop(_unpack, blob.encoding, blob.data)
                intact = await _off_loop(_digest, raw) == digest
            except (zlib.error, ValueError):
                intact = False
            if not intact:
                owners = await self.table.targets_of(digest)
                named = ", ".join(repr(t.target_id) for t in owners) or _claim_owner(claim)
                raise BlobCorruptError(
                    f"the blob of payload claim {digest} does not hash to its digest (altered "
                    f"or truncated in the database); stored for {named}",
                    digest=digest,
                    workflow_id=claim.claim_data.get("workflow_id", ""),
                )
            payloads.append(Payload.FromString(raw))
        return payloads


def with_blob_storage(
    existing: DataConverter | None,
    driver: StatecoreBlobDriver,
    *,
    threshold_bytes: int = DEFAULT_BLOB_THRESHOLD_BYTES,
) -> DataConverter:
    """``existing`` with statecore's driver added to its external storage.

    Without external storage, payloads of ``threshold_bytes`` or more go to statecore's
    database. With the user's own (an S3 driver, say), their drivers stay registered (claims
    they wrote keep resolving) and their choice comes first: a payload over their threshold
    that their selector (or their single driver) takes goes to them; one they leave inline
    goes to statecore's driver when it is at least ``threshold_bytes``. A converter that
    already carries a driver named ``statecore.sql`` is returned as it is."""
    base = existing if existing is not None else DataConverter.default
    if threshold_bytes < 0:
        raise ValueError("threshold_bytes must be 0 or more")
    current = base.external_storage
    if current is None:
        storage = ExternalStorage(drivers=[driver], payload_size_threshold=threshold_bytes)
        return dataclasses.replace(base, external_storage=storage)
    names = {d.name() for d in current.drivers}
    if DRIVER_NAME in names:
        return base
    user_threshold = current.payload_size_threshold
    user_selector = current.driver_selector
    user_default = current.drivers[0] if len(current.drivers) == 1 else None

    def select(context: StorageDriverSelectContext, payload: Payload) -> StorageDriver | None:
        size = payload.ByteSize()
        if size >= user_threshold:
            chosen = user_selector(context, payload) if user_selector else user_default
            if chosen is not None:
                return chosen
        return driver if size >= threshold_bytes else None

    storage = ExternalStorage(
        drivers=[*current.drivers, driver],
        driver_selector=select,
        payload_size_threshold=min(threshold_bytes, user_threshold),
    )
    return dataclasses.replace(base, external_storage=storage)


class StatecoreBlobPlugin(SimplePlugin):
    """Large payloads of every workflow and activity stored in statecore's database.

    For a client and worker that do not run ``StatecorePlugin`` (the official OpenAI Agents
    or LangGraph plugins, say)::

        client = await Client.connect(address, plugins=[
            OpenAIAgentsPlugin(...), StatecoreBlobPlugin("postgresql+asyncpg://app@db/agents")])

    ``StatecorePlugin(..., blob_threshold_bytes=...)`` does the same for statecore's worker.

    Args:
        database_url: statecore's database (not ``memory://``).
        threshold_bytes: payloads this large or larger are stored by reference.
        migrate: apply statecore's migrations when a worker starts.
    """

    def __init__(
        self,
        database_url: str,
        *,
        threshold_bytes: int = DEFAULT_BLOB_THRESHOLD_BYTES,
        migrate: bool = True,
    ) -> None:
        self.driver = StatecoreBlobDriver(database_url)
        self._database_url = database_url
        self._migrate = migrate
        super().__init__(
            "statecore.blobs",
            data_converter=lambda existing: with_blob_storage(
                existing, self.driver, threshold_bytes=threshold_bytes
            ),
            run_context=self._run_context,
        )

    @asynccontextmanager
    async def _run_context(self) -> AsyncIterator[None]:
        if self._migrate:
            from statecore.store._migrate import upgrade_database

            await upgrade_database(self._database_url)
        try:
            yield
        finally:
            await self.driver.close()


# --- the sweep ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepReport:
    """What one sweep found and did."""

    #: Workflow targets whose references were all older than the grace period.
    checked: int
    #: Of those, the ones Temporal no longer holds any history for.
    gone: int
    #: Targets left alone: another namespace than the client's, or Temporal did not answer.
    skipped: int
    references_deleted: int
    blobs_deleted: int
    bytes_freed: int


async def history_gone(client: Client, target: BlobTarget) -> bool | None:
    """True when Temporal holds no run of ``target``'s workflow id (so no history can hold a
    claim stored for it, even one a reset copied into a newer run); False when it holds one;
    None when it could not tell (another namespace, or the server failed)."""
    if target.namespace != client.namespace:
        return None
    runs = [target.run_id, ""] if target.run_id else [""]
    for run_id in runs:
        try:
            await client.get_workflow_handle(target.target_id, run_id=run_id or None).describe()
            return False
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                return None
    return True


async def sweep_blobs(
    client: Client,
    table: BlobTable,
    *,
    grace_seconds: float = BLOB_SWEEP_GRACE_SECONDS,
    dry_run: bool = False,
    now: datetime | None = None,
) -> SweepReport:
    """Delete the blobs no history can reference any more (docs/large_values.md, "Retention").

    A workflow target's references go once every one of them is older than
    ``grace_seconds`` and Temporal (in ``client``'s namespace) holds no run of its workflow
    id: the namespace's retention after the run closed has passed, or the history was
    deleted. Then a blob goes once no reference names it and it is older than the grace
    period. Targets of other namespaces, standalone activities and payloads stored with no
    workflow are never swept. ``dry_run`` reports what would be deleted and deletes nothing.
    """
    cutoff = grace_cutoff(now or datetime.now(UTC), grace_seconds)
    candidates = await table.sweep_candidates(older_than=cutoff)
    gone: list[BlobTarget] = []
    skipped = 0
    for candidate in candidates:
        verdict = await history_gone(client, candidate.target)
        if verdict is None:
            skipped += 1
        elif verdict:
            gone.append(candidate.target)
    if dry_run:
        return SweepReport(len(candidates), len(gone), skipped, 0, 0, 0)
    references = await table.forget(gone, older_than=cutoff)
    deleted, freed = await table.delete_unreferenced(older_than=cutoff)
    return SweepReport(len(candidates), len(gone), skipped, references, deleted, freed)
