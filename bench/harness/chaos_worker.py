"""The worker the chaos run kills: a real statecore worker whose model takes a little time.

    python -m bench.harness.chaos_worker ADDRESS TASK_QUEUE DATABASE_URL

The model is the offline model behind a random 20-200 ms delay, standing in for an LLM's
latency so that kills land inside turns as well as between them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sys

from temporalio.client import Client
from temporalio.worker import Worker

from statecore.llm import ModelRequest, ModelResponse, OfflineModel
from statecore.temporal._plugin import StatecorePlugin


class LatentOfflineModel:
    name = "offline-with-latency"

    def __init__(self) -> None:
        self._inner = OfflineModel()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(random.uniform(0.02, 0.2))
        return await self._inner.complete(request)


async def main(address: str, task_queue: str, database_url: str) -> None:
    logging.basicConfig(level=logging.WARNING)
    watchdog = asyncio.ensure_future(_exit_when_orphaned())
    plugin = StatecorePlugin(database_url, models={"default": LatentOfflineModel()})
    while True:  # the dev server may be restarting when this worker starts
        try:
            client = await Client.connect(address, plugins=[plugin])
            break
        except RuntimeError:
            await asyncio.sleep(0.5)
    async with Worker(client, task_queue=task_queue):
        await watchdog


async def _exit_when_orphaned() -> None:
    """End this process once the chaos driver that started it is gone (our parent becomes
    init): a driver killed outright must not leave workers behind."""
    parent = os.getppid()
    while os.getppid() == parent:  # noqa: ASYNC110 (polls the OS, no event to wait on)
        await asyncio.sleep(1.0)
    os._exit(0)  # the driver is gone; there is nothing to shut down gracefully for


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
