"""A statecore worker for PlanAgent in its own process (concurrent writers through one token).

python -m tests.temporal.share_worker ADDRESS TASK_QUEUE DATABASE_URL READY_FILE
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from statecore.temporal._plugin import StatecorePlugin
from tests.temporal.share_workflow import PlanAgent


async def main(address: str, task_queue: str, url: str, ready: str) -> None:
    plugin = StatecorePlugin(url, extra_workflows=[PlanAgent])
    client = await Client.connect(address, plugins=[plugin])
    async with Worker(client, task_queue=task_queue):
        Path(ready).write_text("ready")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
