"""Side (a) of the ADK side-by-side benchmark: the agent on Temporal's official integration.

Run by ``bench/google_adk_side_by_side.py`` with the Python of
``.cache/venv-official-google-adk`` (never statecore's environment); it starts its own worker,
drives the turns against the given dev server and writes its JSON result to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.google_adk import GoogleAdkPlugin
from temporalio.worker import Worker

from bench.harness.adk_weather import register_model
from bench.harness.official_adk_workflow import WORKFLOW_TYPE, OfficialAdkChat
from bench.harness.side_by_side_measure import drive, history_report, side_report

#: How long a closed workflow may take to complete before the report reads its status.
CLOSE_WITHIN_SECONDS = 120.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="the dev server, host:port")
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--checkpoints", default="10,100,300")
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args()


async def run(args: argparse.Namespace) -> dict:
    register_model()
    client = await Client.connect(args.address, plugins=[GoogleAdkPlugin()])
    queue = f"official-adk-{uuid.uuid4().hex[:8]}"
    workflow_id = f"official-adk-chat-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[OfficialAdkChat]):
        handle = await client.start_workflow(WORKFLOW_TYPE, id=workflow_id, task_queue=queue)

        async def send(n: int, turn_id: str, text: str) -> str:
            return await handle.execute_update("send_message", text, id=turn_id, result_type=str)

        latencies, stopped_by, last_reply = await drive(send, args.turns, label="official")
        if stopped_by is None:
            await handle.signal("close")
            # Closed once the workflow has run that signal: the report reads its status.
            await asyncio.wait_for(handle.result(), CLOSE_WITHIN_SECONDS)
        checkpoints = [int(x) for x in args.checkpoints.split(",")]
        history = await history_report(client, workflow_id, len(latencies), checkpoints)
    return side_report(
        "temporalio-google-adk (Temporal's official integration, pre-release): the ADK "
        "Runner and its in-memory session in the workflow, model calls as activities",
        ("temporalio-google-adk", "google-adk", "temporalio"),
        args.turns,
        latencies,
        stopped_by,
        last_reply,
        history,
    )


def main() -> None:
    args = parse_args()
    result = asyncio.run(run(args))
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
