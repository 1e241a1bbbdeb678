"""A statecore worker running a LangGraph graph as its agent, in its own process, so tests
can SIGKILL it mid-turn.

    python -m tests.temporal.graph_worker_process ADDRESS TASK_QUEUE DATABASE_URL MARKER_DIR \
        DELAY AGENT_NAME

The graph is tests/integrations/langgraph_graphs.py's; each node run appends a line to
MARKER_DIR/node-calls, and the tool node then sleeps DELAY seconds.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from statecore.temporal._plugin import StatecorePlugin
from tests.integrations.langgraph_graphs import build_graph


async def main(
    address: str, task_queue: str, url: str, marker_dir: str, delay: str, name: str
) -> None:
    # The builder, not a compiled graph: the plugin compiles it with the session's saver.
    graph = build_graph(Path(marker_dir) / "node-calls", float(delay))
    plugin = StatecorePlugin(url, agents={name: graph})
    client = await Client.connect(address, plugins=[plugin])
    async with Worker(client, task_queue=task_queue):
        (Path(marker_dir) / "worker-ready").write_text("ready")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
