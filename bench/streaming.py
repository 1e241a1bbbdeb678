"""Streamed turns: time to first token, delay per chunk, history bytes and SQL bytes.

    python -m bench.streaming [--turns 30] [--dialects sqlite,postgresql] [--out DIR]

A local OpenAI-compatible server streams each reply: it waits ``--think-ms`` (the model's own
time to first token), then sends ``--pieces`` pieces ``--gap-ms`` apart. Each piece carries the
server's clock (``<time.time()> ``), so whoever receives it knows how long it travelled. The
same replies are read three ways:

- **model**: ``OpenAICompatibleModel.stream`` called directly (the model's own figures);
- **statecore**: ``AgentSessionClient.stream`` on a worker whose model is that client with
  ``streams=True``: through the activity's writer, the stream row and a reader polling (SQLite)
  or woken by NOTIFY (PostgreSQL);
- **unstreamed**: ``send`` of the same turn, for the history comparison.

Reported per dialect: time to first token (from the call to the first delta) for the model and
through statecore, and the added time (p50/p99); the delay of each piece from the server's send
to the reader (p50/p99); the workflow history bytes of a streamed turn's session and of the
unstreamed one's; the SQL bytes the stream wrote (number of row writes and text bytes) per turn
and the stream rows left after the turns (0). Results go to
``bench/results/streaming/results.json`` and ``streaming.png``; docs/streaming.md explains them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from statecore import (
    AgentSessionClient,
    FinalEvent,
    StatecorePlugin,
    TextEvent,
    open_store,
    upgrade_database,
)
from statecore.core._models import Message
from statecore.llm import ModelRequest, OpenAICompatibleModel
from statecore.llm._base import TextDelta
from statecore.temporal._devserver import start_dev_server

RESULTS = Path(__file__).resolve().parent / "results" / "streaming"
POSTGRES_URL = os.environ.get(
    "STATECORE_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)


# --- the streaming model server ----------------------------------------------------------------


class StreamingServer:
    """Chat completions with ``"stream": true``: think, then timestamped pieces."""

    def __init__(self, think: float, pieces: int, gap: float) -> None:
        self.think, self.pieces, self.gap = think, pieces, gap
        handler = _handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> StreamingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


def _handler(server: StreamingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            if not body.get("stream"):
                self._whole()  # a summary for compaction: not measured
                return
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            time.sleep(server.think)
            for i in range(server.pieces):
                if i:
                    time.sleep(server.gap)
                self.wfile.write(_chunk({"content": f"{time.time():.6f} "}))
                self.wfile.flush()
            self.wfile.write(_chunk({}, "stop"))
            usage = {"prompt_tokens": 10, "completion_tokens": server.pieces}
            self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _whole(self) -> None:
            reply = {
                "id": "c",
                "object": "chat.completion",
                "model": "bench",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "A short summary."},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 4},
            }
            payload = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def piece_delays(text: str, received: float) -> list[float]:
    """Seconds from each piece's send (its timestamp) to ``received``."""
    return [received - float(stamp) for stamp in text.split()]


# --- the measurements --------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(pct(values, 0.5) * 1000, 2),
        "p99": round(pct(values, 0.99) * 1000, 2),
        "mean": round(statistics.fmean(values) * 1000, 2),
        "n": len(values),
    }


async def model_alone(base_url: str, turns: int) -> dict[str, Any]:
    """The model's own time to first token and piece delay, called directly."""
    model = OpenAICompatibleModel(base_url, model="bench", streams=True)
    firsts: list[float] = []
    delays: list[float] = []
    first_pieces: list[float] = []
    try:
        for _ in range(turns):
            started = time.time()
            first = None
            async for item in model.stream(
                ModelRequest(messages=[Message(role="user", content="hi")])
            ):
                if isinstance(item, TextDelta):
                    now = time.time()
                    if first is None:
                        first = now - started
                        first_pieces.append(piece_delays(item.text, now)[0])
                    delays.extend(piece_delays(item.text, now))
            assert first is not None
            firsts.append(first)
    finally:
        await model.aclose()
    return {
        "ttft_ms": summary_ms(firsts),
        "first_piece_delay_ms": summary_ms(first_pieces),
        "piece_delay_ms": summary_ms(delays),
    }


def _instrument(store: Any, counts: dict[str, int]) -> None:
    """Count the stream row writes of the worker's store and the text bytes they carried."""
    streams = store.turn_streams
    write, remove = streams.write, streams.remove

    async def counted_write(ref: Any, turn_id: str, attempt: int, text: str, *rest: Any) -> bool:
        counts["writes"] += 1
        counts["text_bytes"] += len(text.encode())
        return bool(await write(ref, turn_id, attempt, text, *rest))

    async def counted_remove(ref: Any, turn_id: str) -> bool:
        counts["removes"] += 1
        return bool(await remove(ref, turn_id))

    streams.write = counted_write
    streams.remove = counted_remove


async def history_bytes(sessions: AgentSessionClient, agent: str, session: str) -> dict[str, Any]:
    """The session's history: events, their bytes, and the bytes of the activities' payloads
    (inputs and results: what a turn carries; the rest is timestamps and ids)."""
    history = await sessions.handle(agent, session).fetch_history()
    payloads = 0
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            payloads += sum(
                p.ByteSize() for p in event.activity_task_scheduled_event_attributes.input.payloads
            )
        if event.HasField("activity_task_completed_event_attributes"):
            payloads += sum(
                p.ByteSize() for p in event.activity_task_completed_event_attributes.result.payloads
            )
    return {
        "events": len(history.events),
        "bytes": sum(e.ByteSize() for e in history.events),
        "activity_payload_bytes": payloads,
    }


@asynccontextmanager
async def database(dialect: str) -> AsyncIterator[str]:
    if dialect == "sqlite":
        path = Path(tempfile.gettempdir()) / f"bench-streaming-{uuid.uuid4().hex}.db"
        try:
            yield f"sqlite+aiosqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import create_async_engine

    name = f"bench_stream_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        await admin.dispose()


async def through_statecore(
    address: str, dialect: str, base_url: str, turns: int
) -> dict[str, Any]:
    async with database(dialect) as url:
        await upgrade_database(url)
        model = OpenAICompatibleModel(base_url, model="bench", streams=True)
        plugin = StatecorePlugin(url, models={"default": model})
        client = await Client.connect(address, plugins=[plugin])
        store = await open_store(url)
        queue = f"bench-stream-{uuid.uuid4().hex[:8]}"
        sessions = AgentSessionClient(client, task_queue=queue, store=store)
        counts = {"writes": 0, "text_bytes": 0, "removes": 0}
        # Workflow ids are global on the server: a fresh agent id per run and dialect.
        agent = f"bench-{uuid.uuid4().hex[:8]}"
        firsts: list[float] = []
        delays: list[float] = []
        first_pieces: list[float] = []
        try:
            async with Worker(client, task_queue=queue):
                await asyncio.wait_for(plugin.store_ready.wait(), 60)
                _instrument(plugin.resources.store, counts)
                # One turn each to open the sessions, so every measured turn is a next turn.
                await sessions.send(agent, "warm", "warm up", turn_id="warm")
                for i in range(turns):
                    started = time.time()
                    first = None
                    async for event in sessions.stream(agent, "streamed", "hi", turn_id=f"t{i}"):
                        if isinstance(event, TextEvent):
                            now = time.time()
                            if first is None:
                                first = now - started
                                first_pieces.append(piece_delays(event.text, now)[0])
                            delays.extend(piece_delays(event.text, now))
                        elif isinstance(event, FinalEvent):
                            assert event.result.turn == i + 1
                    assert first is not None
                    firsts.append(first)
                writes_per_turn = counts["writes"] / turns
                bytes_per_turn = counts["text_bytes"] / turns
                # The same turns, unstreamed (send), for the history comparison.
                for i in range(turns):
                    await sessions.send(agent, "unstream", "hi", turn_id=f"t{i}")
                streamed_history = await history_bytes(sessions, agent, "streamed")
                unstreamed_history = await history_bytes(sessions, agent, "unstream")
                rows_left = await store.turn_streams.count(sessions.ref(agent, "streamed"))
        finally:
            await store.close()
            await model.aclose()
    return {
        "ttft_ms": summary_ms(firsts),
        "first_piece_delay_ms": summary_ms(first_pieces),
        "piece_delay_ms": summary_ms(delays),
        "stream_writes_per_turn": round(writes_per_turn, 2),
        "stream_text_bytes_per_turn": round(bytes_per_turn, 1),
        "stream_rows_left_after": rows_left,
        "history_streamed_session": streamed_history,
        "history_unstreamed_session": unstreamed_history,
        "turns": turns,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dialects = list(result["statecore"])
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    labels = ["model", *dialects]
    rows = [result["model"], *(result["statecore"][d] for d in dialects)]
    for ax, key, title in (
        (axes[0], "ttft_ms", "time to first token (ms)"),
        (axes[1], "piece_delay_ms", "delay per piece, sent to read (ms)"),
    ):
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], [r[key]["p50"] for r in rows], 0.4, label="p50")
        ax.bar([i + 0.2 for i in x], [r[key]["p99"] for r in rows], 0.4, label="p99")
        ax.set_xticks(list(x), labels)
        ax.set_title(title)
        ax.legend()
    history = [
        (result["statecore"][d]["history_streamed_session"]["bytes"],
         result["statecore"][d]["history_unstreamed_session"]["bytes"])
        for d in dialects
    ]  # fmt: skip
    x = range(len(dialects))
    axes[2].bar([i - 0.2 for i in x], [h[0] for h in history], 0.4, label="streamed")
    axes[2].bar([i + 0.2 for i in x], [h[1] for h in history], 0.4, label="sent (unstreamed)")
    axes[2].set_xticks(list(x), dialects)
    axes[2].set_title(f"workflow history bytes, {result['config']['turns']} turns")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--dialects", default="sqlite,postgresql")
    parser.add_argument("--think-ms", type=float, default=200.0)
    parser.add_argument("--pieces", type=int, default=40)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    config = {
        "turns": args.turns,
        "think_ms": args.think_ms,
        "pieces": args.pieces,
        "gap_ms": args.gap_ms,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
    }
    server = await start_dev_server()
    try:
        with StreamingServer(args.think_ms / 1000, args.pieces, args.gap_ms / 1000) as model:
            result: dict[str, Any] = {"config": config}
            result["model"] = await model_alone(model.base_url, args.turns)
            result["statecore"] = {}
            for dialect in args.dialects.split(","):
                measured = await through_statecore(
                    server.address, dialect, model.base_url, args.turns
                )
                measured["ttft_added_p50_ms"] = round(
                    measured["ttft_ms"]["p50"] - result["model"]["ttft_ms"]["p50"], 2
                )
                measured["first_piece_added_p50_ms"] = round(
                    measured["first_piece_delay_ms"]["p50"]
                    - result["model"]["first_piece_delay_ms"]["p50"],
                    2,
                )
                result["statecore"][dialect] = measured
    finally:
        server.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out / "streaming.png")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
