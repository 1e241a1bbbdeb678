"""A statecore worker whose offline model streams slowly, in its own process, so tests can
SIGKILL it in the middle of a streamed reply.

    python -m tests.temporal.stream_worker_process ADDRESS TASK_QUEUE DATABASE_URL MARKER_DIR \
        TOKEN_DELAY

Writes MARKER_DIR/worker-ready once it polls.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from statecore.llm import OfflineModel
from statecore.temporal._plugin import StatecorePlugin


async def main(address: str, task_queue: str, url: str, marker_dir: str, delay: str) -> None:
    plugin = StatecorePlugin(url, models={"default": OfflineModel(token_delay=float(delay))})
    client = await Client.connect(address, plugins=[plugin])
    async with Worker(client, task_queue=task_queue):
        (Path(marker_dir) / "worker-ready").write_text("ready")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
