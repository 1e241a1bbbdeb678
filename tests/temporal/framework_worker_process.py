"""A statecore worker running one agent framework's agent, in its own process, so tests can
SIGKILL it mid-turn.

    python -m tests.temporal.framework_worker_process ADDRESS TASK_QUEUE DATABASE_URL \
        MARKER_DIR DELAY AGENT_NAME FRAMEWORK

FRAMEWORK is one of ``openai-agents``, ``langgraph``, ``google-adk``, ``pydantic-ai``; only
that framework is imported. The agent's model is the framework's deterministic test model
behind a delay (for LangGraph, the graph's tool node sleeps); each model call (each node run)
appends a line to MARKER_DIR/model-calls (MARKER_DIR/node-calls) first, so a test knows a turn
is inside a model call (a node).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from statecore.temporal._plugin import StatecorePlugin


def build(framework: str, name: str, markers: Path, delay: float) -> Any:
    if framework == "openai-agents":
        from tests.integrations.openai_agents.agents_fixture import RuleModel, build_agent

        return build_agent(RuleModel(calls_file=markers / "model-calls", delay=delay))
    if framework == "langgraph":
        from tests.integrations.langgraph_graphs import build_graph

        # The builder, not a compiled graph: the plugin compiles it with the session's saver.
        return build_graph(markers / "node-calls", delay)
    if framework == "google-adk":
        from tests.integrations.google_adk.adk_agents import build_agent as build_adk_agent

        return build_adk_agent(calls_file=str(markers / "model-calls"), delay=delay)
    if framework == "pydantic-ai":
        from statecore.integrations.pydantic_ai import PydanticAIAgentTurn
        from tests.integrations.pydantic_ai.agents_fixture import Forecasts, build_desk_agent

        agent = build_desk_agent(markers / "model-calls", delay)
        return PydanticAIAgentTurn(agent, deps=Forecasts(), name=name)
    raise SystemExit(f"unknown framework {framework!r}")


async def main(
    address: str, task_queue: str, url: str, marker_dir: str, delay: str, name: str, framework: str
) -> None:
    agent = build(framework, name, Path(marker_dir), float(delay))
    plugin = StatecorePlugin(url, agents={name: agent})
    client = await Client.connect(address, plugins=[plugin])
    async with Worker(client, task_queue=task_queue):
        (Path(marker_dir) / "worker-ready").write_text("ready")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:8]))
