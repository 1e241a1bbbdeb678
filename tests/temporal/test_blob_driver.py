"""statecore's storage driver on each database, without a Temporal server: what it writes,
what it reads back, and its failures (a missing or corrupted blob, an unreachable database,
two stores of the same bytes at once, a codec in front of it, a user's driver beside it)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import zlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import func, select, update
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from statecore.core._errors import (
    BlobCorruptError,
    BlobMissingError,
    BlobStoreUnavailableError,
    BlobTooLargeError,
    InvalidInputError,
)
from statecore.core._limits import MAX_BLOB_BYTES
from statecore.store._migrate import upgrade_database
from statecore.store.sql._schema import blob_refs, blobs
from statecore.temporal._blob_driver import (
    DRIVER_NAME,
    StatecoreBlobDriver,
    with_blob_storage,
)
from statecore.temporal._encryption import EncryptionCodec, Keyring
from tests.dbs import fresh_database
from tests.store.migration_helpers import ALL

WORKFLOW = StorageDriverStoreContext(
    target=StorageDriverWorkflowInfo(namespace="default", id="wf-1", run_id="run-1", type="W")
)
RETRIEVE = StorageDriverRetrieveContext()


def _payload(size: int, *, seed: str = "a") -> Payload:
    text = (seed * (size // len(seed) + 1))[:size]
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())


@pytest.fixture(params=ALL)
async def driver(request: pytest.FixtureRequest) -> AsyncIterator[StatecoreBlobDriver]:
    async with fresh_database(request.param, "blobs") as url:
        await upgrade_database(url)
        made = StatecoreBlobDriver(url)
        try:
            yield made
        finally:
            await made.close()


async def _rows(driver: StatecoreBlobDriver) -> tuple[int, int]:
    async with driver.table.engine.connect() as conn:
        n_blobs = await conn.scalar(select(func.count()).select_from(blobs))
        n_refs = await conn.scalar(select(func.count()).select_from(blob_refs))
    return int(n_blobs or 0), int(n_refs or 0)


async def test_a_payload_round_trips_compressed_and_deduplicated(
    driver: StatecoreBlobDriver,
) -> None:
    payload = _payload(600_000)
    [claim] = await driver.store(WORKFLOW, [payload])
    digest = hashlib.sha256(payload.SerializeToString()).hexdigest()
    assert claim.claim_data["digest"] == digest
    assert claim.claim_data["workflow_id"] == "wf-1"
    assert await driver.retrieve(RETRIEVE, [claim]) == [payload]
    stored = await driver.table.get(digest)
    assert stored is not None and stored.encoding == "zlib"
    assert len(stored.data) < payload.ByteSize() // 10

    # The same bytes again, for the same workflow and another one: one blob, two references.
    other = StorageDriverStoreContext(
        target=StorageDriverWorkflowInfo(namespace="default", id="wf-2", run_id="r2")
    )
    await driver.store(WORKFLOW, [payload])
    await driver.store(other, [payload])
    assert await _rows(driver) == (1, 2)
    usage = await driver.table.usage()
    assert {u.target.target_id for u in usage} == {"wf-1", "wf-2"}


async def test_bytes_that_do_not_compress_are_kept_raw(driver: StatecoreBlobDriver) -> None:
    payload = Payload(metadata={"encoding": b"binary/null"}, data=os.urandom(300_000))
    [claim] = await driver.store(WORKFLOW, [payload])
    stored = await driver.table.get(claim.claim_data["digest"])
    assert stored is not None and stored.encoding == "raw"
    assert await driver.retrieve(RETRIEVE, [claim]) == [payload]


async def test_a_16_mib_payload_round_trips(driver: StatecoreBlobDriver) -> None:
    # Random hex: compresses only to about half, so the database really takes ~8 MiB.
    payload = Payload(
        metadata={"encoding": b"json/plain"}, data=os.urandom(8 * 1024 * 1024).hex().encode()
    )
    [claim] = await driver.store(WORKFLOW, [payload])
    assert await driver.retrieve(RETRIEVE, [claim]) == [payload]


async def test_a_payload_over_the_blob_limit_is_refused(driver: StatecoreBlobDriver) -> None:
    payload = Payload(data=b"x" * (MAX_BLOB_BYTES + 1))
    with pytest.raises(BlobTooLargeError):
        await driver.store(WORKFLOW, [payload])
    assert await _rows(driver) == (0, 0)


async def test_a_missing_blob_names_its_claim_and_workflow(driver: StatecoreBlobDriver) -> None:
    claim = StorageDriverClaim({"digest": "0" * 64, "workflow_id": "wf-gone", "run_id": "r"})
    with pytest.raises(BlobMissingError) as caught:
        await driver.retrieve(RETRIEVE, [claim])
    assert "0" * 64 in caught.value.message and "wf-gone" in caught.value.message
    assert caught.value.code == "BlobMissing" and not caught.value.retryable


async def test_a_corrupted_blob_is_refused_naming_claim_and_workflow(
    driver: StatecoreBlobDriver,
) -> None:
    [claim] = await driver.store(WORKFLOW, [_payload(400_000)])
    digest = claim.claim_data["digest"]
    stored = await driver.table.get(digest)
    assert stored is not None
    flipped = zlib.compress(zlib.decompress(stored.data).replace(b"aaaa", b"aaab", 1))
    async with driver.table.engine.begin() as conn:
        await conn.execute(update(blobs).where(blobs.c.digest == digest).values(data=flipped))
    with pytest.raises(BlobCorruptError) as caught:
        await driver.retrieve(RETRIEVE, [claim])
    assert digest in caught.value.message and "wf-1" in caught.value.message
    # Truncated bytes (zlib cannot even inflate them) are the same error.
    async with driver.table.engine.begin() as conn:
        await conn.execute(
            update(blobs).where(blobs.c.digest == digest).values(data=stored.data[:100])
        )
    with pytest.raises(BlobCorruptError):
        await driver.retrieve(RETRIEVE, [claim])


async def test_two_workers_storing_the_same_blob_at_once_write_it_once(
    driver: StatecoreBlobDriver,
) -> None:
    url = driver.table.engine.url.render_as_string(hide_password=False)
    others = [StatecoreBlobDriver(url) for _ in range(4)]
    payload = _payload(500_000, seed="xyz")
    contexts = [
        StorageDriverStoreContext(
            target=StorageDriverWorkflowInfo(namespace="default", id=f"wf-{i}", run_id="r")
        )
        for i in range(8)
    ]
    try:
        claims = await asyncio.wait_for(
            asyncio.gather(
                *(others[i % 4].store(ctx, [payload]) for i, ctx in enumerate(contexts))
            ),
            timeout=60,  # eight stores of 0.5 MB; a lock-up would otherwise hang the test
        )
    finally:
        for other in others:
            await other.close()
    assert len({c[0].claim_data["digest"] for c in claims}) == 1
    assert await _rows(driver) == (1, 8)
    assert await driver.retrieve(RETRIEVE, claims[0]) == [payload]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://postgres@127.0.0.1:1/none",
        "mysql+asyncmy://root@127.0.0.1:1/none",
    ],
)
async def test_an_unreachable_database_is_a_typed_retryable_failure(url: str) -> None:
    driver = StatecoreBlobDriver(url)
    try:
        with pytest.raises(BlobStoreUnavailableError) as caught:
            await driver.store(WORKFLOW, [_payload(300_000)])
        assert caught.value.retryable and "127.0.0.1" in caught.value.message
        with pytest.raises(BlobStoreUnavailableError):
            await driver.retrieve(RETRIEVE, [StorageDriverClaim({"digest": "1" * 64})])
    finally:
        await driver.close()


async def test_with_a_codec_no_plaintext_reaches_the_blob_table(
    driver: StatecoreBlobDriver,
) -> None:
    codec = EncryptionCodec(Keyring([("k1", b"\x01" * 32)]))
    converter = with_blob_storage(
        DataConverter(payload_codec=codec), driver, threshold_bytes=1024
    ).with_context(_no_context())
    secret = "the-secret-plaintext-" * 20_000
    [encoded] = await converter.encode([secret])
    assert encoded.metadata.get("encoding") == b"json/protobuf"  # a claim, not the value
    async with driver.table.engine.connect() as conn:
        data = [bytes(row[0]) for row in await conn.execute(select(blobs.c.data))]
        encodings = [row[0] for row in await conn.execute(select(blobs.c.encoding))]
    assert len(data) == 1 and encodings == ["raw"]  # ciphertext does not compress
    assert b"the-secret-plaintext" not in data[0]
    assert await converter.decode([encoded]) == [secret]


def _no_context() -> object:
    from temporalio.converter import WorkflowSerializationContext

    return WorkflowSerializationContext(namespace="default", workflow_id="wf-codec")


class _DictDriver(StorageDriver):
    """A user's own driver (an S3 one, say), in memory."""

    def __init__(self) -> None:
        self.stored: dict[str, Payload] = {}

    def name(self) -> str:
        return "user.dict"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        claims = []
        for payload in payloads:
            key = str(len(self.stored))
            self.stored[key] = payload
            claims.append(StorageDriverClaim({"key": key}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return [self.stored[c.claim_data["key"]] for c in claims]


async def test_a_users_driver_keeps_its_payloads_and_statecore_takes_the_rest(
    driver: StatecoreBlobDriver,
) -> None:
    mine = _DictDriver()
    users = DataConverter(
        external_storage=ExternalStorage(drivers=[mine], payload_size_threshold=1_000_000)
    )
    converter = with_blob_storage(users, driver, threshold_bytes=100_000)
    assert converter.external_storage is not None
    assert [d.name() for d in converter.external_storage.drivers] == ["user.dict", DRIVER_NAME]
    small, middle, large = "s" * 1000, "m" * 300_000, "l" * 2_000_000
    encoded = await converter.encode([small, middle, large])
    assert len(mine.stored) == 1  # the 2 MB one: over the user's threshold, their driver
    assert (await _rows(driver))[0] == 1  # the 300 KB one: statecore's
    assert encoded[0].data == b'"' + b"s" * 1000 + b'"'  # under both: inline
    assert await converter.decode(encoded) == [small, middle, large]
    # Adding statecore's driver again (client and worker both configured) changes nothing.
    assert with_blob_storage(converter, driver) is converter


async def test_a_user_selector_that_declines_leaves_the_payload_to_statecore(
    driver: StatecoreBlobDriver,
) -> None:
    mine = _DictDriver()
    users = DataConverter(
        external_storage=ExternalStorage(
            drivers=[mine], driver_selector=lambda ctx, p: None, payload_size_threshold=10
        )
    )
    converter = with_blob_storage(users, driver, threshold_bytes=100_000)
    encoded = await converter.encode(["x" * 200_000, "y" * 50_000])
    assert not mine.stored
    assert (await _rows(driver))[0] == 1
    assert await converter.decode(encoded) == ["x" * 200_000, "y" * 50_000]


async def test_the_plugin_keeps_the_users_codec_and_driver_and_adds_statecores(
    tmp_path: Path,
) -> None:
    from statecore import StatecorePlugin

    codec = EncryptionCodec(Keyring([("k1", b"\x02" * 32)]))
    mine = _DictDriver()
    users = DataConverter(
        payload_codec=codec,
        external_storage=ExternalStorage(drivers=[mine], payload_size_threshold=4_000_000),
    )
    url = f"sqlite+aiosqlite:///{tmp_path / 'plugin.db'}"
    plugin = StatecorePlugin(url, blob_threshold_bytes=100_000)
    config = plugin.configure_client({"data_converter": users})  # type: ignore[typeddict-item]
    converter = config["data_converter"]
    assert converter.payload_codec is codec
    assert converter.external_storage is not None
    assert [d.name() for d in converter.external_storage.drivers] == ["user.dict", DRIVER_NAME]
    assert plugin.resources.large_values
    # Without the switch nothing changes: no external storage, turns read 1 MiB inline.
    plain = StatecorePlugin(url)
    plain_config = plain.configure_client({"data_converter": DataConverter()})  # type: ignore[typeddict-item]
    assert plain_config["data_converter"].external_storage is None
    assert not plain.resources.large_values


def test_blob_storage_needs_a_sql_database() -> None:
    from statecore import StatecorePlugin

    with pytest.raises(ValueError, match="SQL database"):
        StatecorePlugin(store=_MemoryLike(), blob_threshold_bytes=1024)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        StatecorePlugin("sqlite+aiosqlite:///x.db", blob_threshold_bytes=-1)
    for url in ("memory://", "sqlite+aiosqlite://"):
        with pytest.raises(InvalidInputError):
            StatecoreBlobDriver(url)


class _MemoryLike:
    """A store without a SQL engine, as memory:// is."""


@pytest.mark.mariadb
async def test_mariadb_max_allowed_packet_is_checked_before_sending() -> None:
    """A server whose max_allowed_packet is below a value's size: a typed refusal naming the
    setting, nothing sent (the server would drop the statement with an error no retry
    fixes). The test server allows 64M, so the store is told a lower figure."""
    from statecore.core._errors import ContentTooLargeError
    from statecore.core._models import KVScope
    from statecore.store import open_store

    async with fresh_database("mysql", "packet") as url:
        await upgrade_database(url)
        store = await open_store(url)
        try:
            store._max_packet_bytes = 1024 * 1024  # type: ignore[attr-defined]
            scope = KVScope(namespace="default")
            with pytest.raises(ContentTooLargeError, match="max_allowed_packet"):
                async with store.transaction() as tx:
                    await tx.kv.put(scope, "files", "big", b"\x01" * (2 * 1024 * 1024))
            async with store.transaction() as tx:
                await tx.kv.put(scope, "files", "small", b"\x01" * 1000)
        finally:
            await store.close()
        driver = StatecoreBlobDriver(url)
        try:
            driver.table._max_packet = 1024 * 1024
            payload = Payload(data=os.urandom(2 * 1024 * 1024))  # does not compress
            with pytest.raises(BlobTooLargeError, match="max_allowed_packet"):
                await driver.store(WORKFLOW, [payload])
            assert await _rows(driver) == (0, 0)
        finally:
            await driver.close()
