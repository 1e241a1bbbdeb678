"""A statecore worker running an ADK agent, in its own process, so tests can SIGKILL it
mid-turn.

    python -m tests.temporal.adk_worker_process ADDRESS TASK_QUEUE DATABASE_URL MARKER_DIR \
        DELAY AGENT_NAME

The agent's model is the rule-based RuleLlm behind a delay; each of its calls appends a line
to MARKER_DIR/model-calls first, so a test knows a turn is inside a model call.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from statecore.temporal._plugin import StatecorePlugin
from tests.integrations.google_adk.adk_agents import build_agent


async def main(
    address: str, task_queue: str, url: str, marker_dir: str, delay: str, name: str
) -> None:
    agent = build_agent(calls_file=str(Path(marker_dir) / "model-calls"), delay=float(delay))
    plugin = StatecorePlugin(url, agents={name: agent})
    client = await Client.connect(address, plugins=[plugin])
    async with Worker(client, task_queue=task_queue):
        (Path(marker_dir) / "worker-ready").write_text("ready")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
