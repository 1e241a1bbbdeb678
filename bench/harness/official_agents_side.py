"""Side (a) of the side-by-side benchmark: the agent on Temporal's official integration.

Run by ``bench/openai_agents_side_by_side.py`` with the Python of ``.cache/venv-official``
(never statecore's environment); it starts its own worker, drives the turns against the given
dev server and model server, and writes its JSON result to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from datetime import timedelta
from pathlib import Path

# The SDK exports traces to OpenAI unless told not to; nothing may leave this machine.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

from agents import set_tracing_disabled
from agents.models.openai_provider import OpenAIProvider
from temporalio.client import Client
from temporalio.contrib.openai_agents import (
    ModelActivityParameters,
    OpenAIAgentsPlugin,
)
from temporalio.worker import Worker

from bench.harness.official_agents_workflow import (
    WORKFLOW_TYPE,
    OfficialAgentChat,
    get_weather,
)
from bench.harness.side_by_side_measure import (
    drive,
    history_report,
    side_report,
)

#: How long a closed workflow may take to complete before the report reads its status.
CLOSE_WITHIN_SECONDS = 120.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="the dev server, host:port")
    parser.add_argument("--model-url", required=True, help="the fake model server's API root")
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--checkpoints", default="10,100,300")
    parser.add_argument("--minutes", type=float, help="stop sending turns after this long")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--blob-database-url",
        help="also run statecore's storage driver (StatecoreBlobPlugin) on this database",
    )
    parser.add_argument("--blob-threshold", type=int, default=256 * 1024)
    return parser.parse_args()


async def run(args: argparse.Namespace) -> dict:
    set_tracing_disabled(True)
    # Chat completions, as statecore's side uses; the activity's input (the whole
    # conversation as Responses-API items) is the same whichever API the model speaks.
    provider = OpenAIProvider(base_url=args.model_url, api_key="fake-key", use_responses=False)
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60)),
        model_provider=provider,
    )
    plugins: list = [plugin]
    if args.blob_database_url:
        from statecore.temporal._blob_driver import StatecoreBlobPlugin

        plugins.append(
            StatecoreBlobPlugin(args.blob_database_url, threshold_bytes=args.blob_threshold)
        )
    client = await Client.connect(args.address, plugins=plugins)
    queue = f"official-{uuid.uuid4().hex[:8]}"
    workflow_id = f"official-agent-chat-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=queue, workflows=[OfficialAgentChat], activities=[get_weather]
    ):
        handle = await client.start_workflow(WORKFLOW_TYPE, id=workflow_id, task_queue=queue)

        async def send(n: int, turn_id: str, text: str) -> str:
            return await handle.execute_update("send_message", text, id=turn_id, result_type=str)

        latencies, stopped_by, last_reply = await drive(
            send, args.turns, label="official", minutes=args.minutes
        )
        if stopped_by is None:
            await handle.signal("close")
            # Closed once the workflow has run that signal: the report reads its status.
            await asyncio.wait_for(handle.result(), CLOSE_WITHIN_SECONDS)
        checkpoints = [int(x) for x in args.checkpoints.split(",")]
        history = await history_report(client, workflow_id, len(latencies), checkpoints)
    return side_report(
        "temporalio-openai-agents (Temporal's official integration), "
        "Runner.run in the workflow, model calls and the tool as activities",
        ("temporalio-openai-agents", "openai-agents", "openai", "temporalio"),
        args.turns,
        latencies,
        stopped_by,
        last_reply,
        history,
    )


async def blob_totals(url: str) -> dict:
    """What the blob table holds after the run (statecore's storage driver)."""
    from statecore.store.sql._blobs import BlobTable

    table = BlobTable.open(url)
    try:
        count, size, stored = await table.totals()
    finally:
        await table.close()
    return {"blobs": count, "payload_bytes": size, "stored_bytes": stored}


def main() -> None:
    args = parse_args()
    result = asyncio.run(run(args))
    if args.blob_database_url:
        result["blob_storage"] = {
            "threshold_bytes": args.blob_threshold,
            **asyncio.run(blob_totals(args.blob_database_url)),
        }
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
