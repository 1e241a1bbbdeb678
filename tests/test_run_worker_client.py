"""``run_worker`` with a Client the program connected itself (its own TLS, API key,
interceptors): statecore's plugin joins a copy of it, and the program's client is untouched."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import DevServer
from statecore.temporal._worker import run_worker
from statecore.temporal._worker_config import WorkerConfig
from tests.temporal.conftest import dev_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.temporal


async def test_run_worker_uses_the_programs_client(
    dev_server: DevServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    queue = f"own-{uuid.uuid4().hex[:8]}"
    own = await Client.connect(dev_server.address)
    stop = asyncio.Event()
    config = WorkerConfig(task_queue=queue, database_url=f"sqlite+aiosqlite:///{tmp_path}/s.db")
    running = asyncio.create_task(run_worker(config, client=own, stop=stop))
    try:
        caller = await Client.connect(dev_server.address, data_converter=pydantic_data_converter)
        sessions = AgentSessionClient(caller, task_queue=queue)
        result = await asyncio.wait_for(sessions.send("own", "s1", "hi", turn_id="t1"), 120)
        assert result.turn == 1 and "hi" in result.reply.content
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
    # The program's client is as it was: no plugin added, its converter its own.
    assert own.config()["plugins"] == []
    assert own.data_converter is not pydantic_data_converter


async def test_a_client_with_dev_or_metrics_is_refused(dev_server: DevServer) -> None:  # noqa: F811
    own = await Client.connect(dev_server.address)
    with pytest.raises(ValueError, match="dev=True"):
        await run_worker(WorkerConfig(dev=True), client=own)
    with pytest.raises(ValueError, match="metrics_port"):
        await run_worker(WorkerConfig(metrics_port=9999), client=own)
