"""The database goes away while a workflow's payloads are stored by reference, and comes
back: the stores fail with a typed, retryable error, Temporal retries the activity and the
workflow task, and the workflow completes with nothing lost (PostgreSQL behind a proxy the
test cuts and restores)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from statecore.core._errors import BlobStoreUnavailableError
from statecore.store._migrate import upgrade_database
from statecore.temporal._blob_driver import StatecoreBlobPlugin
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.temporal.test_large_values import BlobsTestWorkflow, digest_of, make_text

pytestmark = [pytest.mark.temporal, pytest.mark.postgres]


class CuttableProxy:
    """A TCP relay to the database that the test can cut (every connection closed, new ones
    refused) and restore on the same port."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers |= {writer, up_writer}

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))


async def _attempts_fail(handle: Any) -> None:
    """Wait (at most 30 s) until the first activity has failed at least once."""
    for _ in range(300):
        pending = (await handle.describe()).raw_description.pending_activities
        if pending and pending[0].attempt > 1:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the activity did not fail within 30 s of the outage")


@contextlib.asynccontextmanager
async def proxied(url: str) -> AsyncIterator[tuple[str, CuttableProxy]]:
    parsed = make_url(url)
    proxy = CuttableProxy(parsed.port or 5432)
    await proxy.start()
    try:
        yield parsed.set(port=proxy.port).render_as_string(hide_password=False), proxy
    finally:
        with contextlib.suppress(AssertionError):
            await proxy.cut()


async def test_a_database_outage_while_storing_loses_nothing(dev_server: DevServer) -> None:
    async with fresh_database("postgresql", "outage") as direct:
        await upgrade_database(direct)
        async with proxied(direct) as (url, proxy):
            plugin = StatecoreBlobPlugin(url, threshold_bytes=64 * 1024, migrate=False)
            client = await Client.connect(
                dev_server.address, data_converter=pydantic_data_converter, plugins=[plugin]
            )
            queue = f"outage-{uuid.uuid4().hex[:8]}"
            async with Worker(
                client,
                task_queue=queue,
                workflows=[BlobsTestWorkflow],
                activities=[make_text, digest_of],
            ):
                # The store itself, while the database is away: typed and retryable.
                await proxy.cut()
                with pytest.raises(BlobStoreUnavailableError) as caught:
                    await plugin.driver.table.put(
                        "0" * 64, encoding="raw", size=1, data=b"x", targets=[]
                    )
                assert caught.value.retryable

                # A workflow started during the outage: its activity's 1 MB result cannot be
                # stored, so the activity fails and Temporal retries it.
                handle = await client.start_workflow(
                    BlobsTestWorkflow.run,
                    1_000_000,
                    id=f"outage-{uuid.uuid4().hex[:8]}",
                    task_queue=queue,
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
                await _attempts_fail(handle)
                await proxy.start()  # the database is back, on the same address
                result = await asyncio.wait_for(handle.result(), timeout=90)
                expected = hashlib.sha256((await make_text(1_000_000)).encode()).hexdigest()
                assert result == expected
                history = await handle.fetch_history()
                started = [
                    e.activity_task_started_event_attributes
                    for e in history.events
                    if e.HasField("activity_task_started_event_attributes")
                ]
                # The first activity's last failure before it succeeded: the typed error.
                assert started[0].attempt > 1
                cause = started[0].last_failure.cause
                assert cause.application_failure_info.type == "BlobStoreUnavailableError"
