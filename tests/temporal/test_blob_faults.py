"""A worker killed (SIGKILL) while it stores a blob leaves nothing that breaks the retry: no
half-written blob, no reference without its blob; the retry stores it whole."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sys
import zlib
from pathlib import Path

import pytest
from sqlalchemy import select
from temporalio.converter import StorageDriverRetrieveContext

from statecore.store._migrate import upgrade_database
from statecore.store.sql._schema import blob_refs, blobs
from statecore.temporal._blob_driver import StatecoreBlobDriver
from tests.dbs import fresh_database
from tests.store.migration_helpers import ALL
from tests.temporal.blob_store_process import context, payload

ROOT = Path(__file__).resolve().parents[2]


async def _read_line(stream: asyncio.StreamReader, within: float) -> str:
    line = await asyncio.wait_for(stream.readline(), within)
    assert line, "the storing process ended before it was killed"
    return line.decode().strip()


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("delay", [0.0, 0.05])
async def test_a_store_killed_mid_way_leaves_nothing_that_breaks_the_retry(
    dialect: str, delay: float
) -> None:
    async with fresh_database(dialect, "kill") as url:
        await upgrade_database(url)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.temporal.blob_store_process",
            url,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.stdout is not None
        try:
            # Two stores complete (30 s each at most: 4 MB on a shared machine), then the
            # process is killed while it stores the third.
            for expected in ("storing 0", "stored 0", "storing 1", "stored 1", "storing 2"):
                assert await _read_line(proc.stdout, 30) == expected
            await asyncio.sleep(delay)
        finally:
            proc.send_signal(signal.SIGKILL)
            await asyncio.wait_for(proc.wait(), 30)

        driver = StatecoreBlobDriver(url)
        try:
            async with driver.table.engine.connect() as conn:
                rows = (
                    await conn.execute(select(blobs.c.digest, blobs.c.encoding, blobs.c.data))
                ).all()
                refs = (await conn.execute(select(blob_refs.c.digest))).all()
            # Every blob there is whole, every reference has its blob.
            assert len(rows) in (2, 3)
            for digest, encoding, data in rows:
                raw = zlib.decompress(data) if encoding == "zlib" else bytes(data)
                assert hashlib.sha256(raw).hexdigest() == digest
            assert {r[0] for r in refs} <= {r[0] for r in rows}
            # The retry (the workflow task or activity runs again) stores it and reads back.
            [claim] = await driver.store(context(2), [payload(2)])
            assert await driver.retrieve(StorageDriverRetrieveContext(), [claim]) == [payload(2)]
        finally:
            await driver.close()
