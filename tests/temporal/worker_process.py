"""A statecore worker in its own process, so tests can SIGKILL it mid-turn.

    python -m tests.temporal.worker_process ADDRESS TASK_QUEUE DATABASE_URL MARKER_DIR DELAY

The model is the offline model behind a delay (the LLM is the one part a test may fake).
Each model call first appends a line to MARKER_DIR/model-calls, so a test knows a turn is
inside its model call and can kill the worker right then.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from statecore.llm import ModelRequest, ModelResponse, OfflineModel
from statecore.temporal._plugin import StatecorePlugin


class SlowOfflineModel:
    name = "slow-offline"

    def __init__(self, marker_dir: Path, delay: float) -> None:
        self._inner = OfflineModel()
        self._calls = marker_dir / "model-calls"
        self._delay = delay

    async def complete(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1].content if request.messages else ""
        with self._calls.open("a") as f:
            f.write(last.replace("\n", " ")[:80] + "\n")
        await asyncio.sleep(self._delay)
        return await self._inner.complete(request)


async def main(address: str, task_queue: str, url: str, marker_dir: str, delay: str) -> None:
    model = SlowOfflineModel(Path(marker_dir), float(delay))
    plugin = StatecorePlugin(url, models={"default": model})
    client = await Client.connect(address, plugins=[plugin])
    async with Worker(client, task_queue=task_queue):
        (Path(marker_dir) / "worker-ready").write_text("ready")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
