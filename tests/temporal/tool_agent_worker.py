"""A ToolAgent worker in its own process, so a test can SIGKILL it in the middle of a tool.

    python -m tests.temporal.tool_agent_worker ADDRESS TASK_QUEUE DATABASE_URL MARKER_DIR

Besides the example tools it registers ``slow`` (activity ``test.slow_step``), a tool whose
side effect is visible: it logs ``start <label> <attempt>`` to MARKER_DIR/tool-log, sleeps
``seconds`` while heartbeating, then logs ``done <label>``. Model calls are logged to
MARKER_DIR/model-calls. The model is the offline one (the LLM is the one part a test may fake).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from activities.tools import example_tools
from statecore.contract._activities import ToolBinding, ToolCallInput, ToolCallResult
from statecore.llm import ModelRequest, ModelResponse, OfflineModel
from statecore.temporal._plugin import StatecorePlugin
from workflows import EXAMPLE_WORKFLOWS

SLOW_STEP = "test.slow_step"
#: Short heartbeat timeout: a killed worker's call is retried on another within seconds.
SLOW = ToolBinding(
    name="slow",
    activity=SLOW_STEP,
    description="Wait, then report the step done.",
    timeout_seconds=30,
    heartbeat_seconds=1.5,
    max_attempts=5,
)
HEARTBEAT_EVERY = 0.2
STICKY_TIMEOUT = timedelta(seconds=2)


def _log(path: Path, line: str) -> None:
    with path.open("a") as f:
        f.write(line + "\n")


def slow_step(markers: Path) -> Callable[..., Any]:
    @activity.defn(name=SLOW_STEP)
    async def run(input: ToolCallInput) -> ToolCallResult:
        args = json.loads(input.call.arguments)
        label, seconds = str(args["label"]), float(args.get("seconds", 0))
        _log(markers / "tool-log", f"start {label} {activity.info().attempt}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            activity.heartbeat()
            await asyncio.sleep(min(HEARTBEAT_EVERY, left))
        _log(markers / "tool-log", f"done {label}")
        return ToolCallResult(content=f"step {label} finished")

    return run


class LoggedOfflineModel:
    name = "logged-offline"

    def __init__(self, markers: Path) -> None:
        self._inner = OfflineModel()
        self._calls = markers / "model-calls"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        _log(self._calls, f"{last.role}: {last.content[:60]}".replace("\n", " "))
        return await self._inner.complete(request)


async def main(address: str, task_queue: str, url: str, marker_dir: str) -> None:
    markers = Path(marker_dir)
    plugin = StatecorePlugin(
        url,
        models={"default": LoggedOfflineModel(markers)},
        extra_workflows=EXAMPLE_WORKFLOWS,
        extra_activities=[slow_step(markers)],
        activity_factories=[example_tools],
    )
    client = await Client.connect(address, plugins=[plugin])
    # After a crash the next workflow task waits this long on the dead worker's sticky queue
    # before any worker may take it (default 10 s); short here so the test stays quick.
    async with Worker(
        client, task_queue=task_queue, sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT
    ):
        (markers / "worker-ready").write_text("ready")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
