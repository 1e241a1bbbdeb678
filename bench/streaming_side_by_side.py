"""Streaming side by side: statecore's stream rows against ``temporalio.contrib.workflow_streams``.

    python -m bench.streaming_side_by_side [--turns 10] [--batch-ms 100]

The same local streaming model (bench/streaming.py's server: ``--think-ms``, then ``--pieces``
timestamped pieces ``--gap-ms`` apart) answers both sides:

- **official**: a workflow with a ``WorkflowStream``; its activity streams the model and
  publishes each delta with ``WorkflowStreamClient.from_within_activity`` (a Signal per batch,
  ``--batch-ms`` apart); the reader subscribes (an Update long-poll per read).
- **statecore**: an AgentSession turn on SQLite with ``OpenAICompatibleModel(streams=True)``,
  read with ``AgentSessionClient.stream``.

Measured: workflow history bytes per turn (the official side's whole run; statecore's session
history divided by its turns), the delay of each piece from the model's send to the reader,
and what a reader sees when the first attempt fails after ``--fail-after`` pieces and is
retried: the text it ends with, against the reply the turn returned. Results go to
``bench/results/streaming/side_by_side.json``; docs/streaming.md explains them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.worker import Worker

from bench.streaming import (
    RESULTS,
    StreamingServer,
    database,
    history_bytes,
    piece_delays,
    summary_ms,
)
from bench.streaming_contrib_workflow import ACTIVITY, TOPIC, ContribStreamedTurn
from statecore import (
    AgentSessionClient,
    FinalEvent,
    RestartedEvent,
    StatecorePlugin,
    TextEvent,
    open_store,
    upgrade_database,
)
from statecore.core._errors import ModelUnavailableError
from statecore.core._models import Message
from statecore.llm import ModelRequest, ModelResponse, OpenAICompatibleModel
from statecore.llm._base import StreamItem, TextDelta
from statecore.temporal._devserver import start_dev_server


class FailingFirstAttempt:
    """The model, except that a turn's first attempt fails after ``fail_after`` pieces
    (``fail_after`` 0: never), as a worker that dies mid-reply would leave it."""

    streams = True

    def __init__(self, inner: OpenAICompatibleModel, fail_after: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.fail_after = fail_after

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        pieces = 0
        first = activity.in_activity() and activity.info().attempt == 1
        async for item in self.inner.stream(request):
            if isinstance(item, TextDelta):
                pieces += 1
                if first and self.fail_after and pieces > self.fail_after:
                    raise ModelUnavailableError("the first attempt dies mid-reply")
            yield item


def contrib_activity(model: FailingFirstAttempt, batch: timedelta) -> Any:
    @activity.defn(name=ACTIVITY)
    async def generate(prompt: str) -> str:
        text = ""
        async with WorkflowStreamClient.from_within_activity(batch_interval=batch) as stream:
            tokens = stream.topic(TOPIC)
            async for item in model.stream(
                ModelRequest(messages=[Message(role="user", content=prompt)])
            ):
                if isinstance(item, TextDelta):
                    tokens.publish({"text": item.text})
                    text += item.text
        return text

    return generate


async def official_turn(client: Client, queue: str) -> dict[str, Any]:
    workflow_id = f"contrib-{uuid.uuid4().hex[:10]}"
    handle = await client.start_workflow(
        ContribStreamedTurn.run, "hi", id=workflow_id, task_queue=queue
    )
    reader = WorkflowStreamClient.create(client, workflow_id)
    seen = ""
    delays: list[float] = []
    async for item in reader.subscribe(TOPIC):
        data = item.data
        if "done" in data:
            break
        delays.extend(piece_delays(data["text"], time.time()))
        seen += data["text"]
    reply = await handle.result()
    history = await handle.fetch_history()
    return {
        "seen": seen,
        "reply": reply,
        "delays": delays,
        "history_bytes": sum(e.ByteSize() for e in history.events),
        "events": len(history.events),
    }


async def statecore_turns(
    sessions: AgentSessionClient, agent: str, session: str, turns: int
) -> dict[str, Any]:
    delays: list[float] = []
    outcomes = []
    for i in range(turns):
        seen = ""
        restarts = 0
        final = None
        async for event in sessions.stream(
            agent, session, "hi", turn_id=f"t{i}", model_heartbeat_seconds=2
        ):
            if isinstance(event, TextEvent):
                delays.extend(piece_delays(event.text, time.time()))
                seen += event.text
            elif isinstance(event, RestartedEvent):
                restarts += 1
                seen = ""
            elif isinstance(event, FinalEvent):
                final = event.result.reply.content
        outcomes.append({"seen": seen, "reply": final, "restarts": restarts})
    return {"delays": delays, "outcomes": outcomes}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    server = await start_dev_server()
    result: dict[str, Any] = {
        "config": {k: v for k, v in vars(args).items() if k != "out"},
    }
    try:
        with StreamingServer(args.think_ms / 1000, args.pieces, args.gap_ms / 1000) as model:
            for scenario, fail_after in (("clean", 0), ("first_attempt_fails", args.fail_after)):
                inner = OpenAICompatibleModel(model.base_url, model="bench", streams=True)
                wrapped = FailingFirstAttempt(inner, fail_after)
                turns = args.turns if scenario == "clean" else 1
                # The official side.
                client = await Client.connect(
                    server.address, data_converter=pydantic_data_converter
                )
                queue = f"contrib-{uuid.uuid4().hex[:8]}"
                official = []
                async with Worker(
                    client,
                    task_queue=queue,
                    workflows=[ContribStreamedTurn],
                    activities=[contrib_activity(wrapped, timedelta(milliseconds=args.batch_ms))],
                ):
                    for _ in range(turns):
                        official.append(await official_turn(client, queue))
                # statecore.
                async with database("sqlite") as url:
                    await upgrade_database(url)
                    plugin = StatecorePlugin(url, models={"default": wrapped})  # type: ignore[dict-item]
                    sc_client = await Client.connect(server.address, plugins=[plugin])
                    store = await open_store(url)
                    sc_queue = f"sc-{uuid.uuid4().hex[:8]}"
                    sessions = AgentSessionClient(sc_client, task_queue=sc_queue, store=store)
                    agent = f"side-{uuid.uuid4().hex[:8]}"
                    try:
                        async with Worker(sc_client, task_queue=sc_queue):
                            ours = await statecore_turns(sessions, agent, "s", turns)
                            history = await history_bytes(sessions, agent, "s")
                    finally:
                        await store.close()
                await inner.aclose()
                result[scenario] = {
                    "official": {
                        "history_bytes_per_turn": round(
                            sum(o["history_bytes"] for o in official) / turns
                        ),
                        "history_events_per_turn": round(
                            sum(o["events"] for o in official) / turns, 1
                        ),
                        "piece_delay_ms": summary_ms([d for o in official for d in o["delays"]]),
                        "reader_text_equals_reply": [o["seen"] == o["reply"] for o in official],
                        "reader_text_chars": [len(o["seen"]) for o in official],
                        "reply_chars": [len(o["reply"]) for o in official],
                    },
                    "statecore": {
                        # The session's whole history (its start and close included) per turn.
                        "history_bytes_per_turn": round(history["bytes"] / turns),
                        "history_events_per_turn": round(history["events"] / turns, 1),
                        "piece_delay_ms": summary_ms(ours["delays"]),
                        "reader_text_equals_reply": [
                            o["seen"] == o["reply"] for o in ours["outcomes"]
                        ],
                        "restarts_seen": [o["restarts"] for o in ours["outcomes"]],
                        "reader_text_chars": [len(o["seen"]) for o in ours["outcomes"]],
                        "reply_chars": [len(o["reply"] or "") for o in ours["outcomes"]],
                    },
                }
    finally:
        server.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--think-ms", type=float, default=200.0)
    parser.add_argument("--pieces", type=int, default=40)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--batch-ms", type=float, default=100.0)
    parser.add_argument("--fail-after", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "side_by_side.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
