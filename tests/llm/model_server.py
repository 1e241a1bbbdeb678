"""A real HTTP server standing in for an OpenAI-compatible model API.

It plays a script of responses in order (the last one repeats once the script runs out) and
records every request it receives, so tests check both what the client sent and how it reacts.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # a dict/list is sent as JSON, str/bytes as they are
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    #: A streamed reply: each item is sent as one SSE ``data:`` frame, ``chunk_delay`` apart,
    #: then ``data: [DONE]``.
    chunks: list[Any] | None = None
    chunk_delay: float = 0.0


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.raw)


def completion(content: str | None = "Hello!", **extra: Any) -> Reply:
    """A 200 chat-completions reply with one choice and usage."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    message.update(extra.pop("message", {}))
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": extra.pop("model", "served-model"),
        "choices": [
            {"index": 0, "message": message, "finish_reason": extra.pop("finish_reason", "stop")}
        ],
        "usage": extra.pop("usage", {"prompt_tokens": 11, "completion_tokens": 7}),
    }
    body.update(extra)
    return Reply(body=body)


def streamed(
    pieces: list[str],
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, int] | None = None,
    chunk_delay: float = 0.0,
) -> Reply:
    """A ``"stream": true`` chat-completions reply: one chunk per text piece, the tool calls
    in two halves each (as servers split their arguments), then the usage chunk."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "served-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks: list[Any] = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces]
    for index, call in enumerate(tool_calls or []):
        arguments = call["arguments"]
        half = len(arguments) // 2
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["name"], "arguments": arguments[:half]},
                        }
                    ]
                }
            )
        )
        chunks.append(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]})
        )
    chunks.append(chunk({}, "tool_calls" if tool_calls else "stop"))
    if usage is not None:
        chunks.append(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": "served-model",
                "choices": [],
                "usage": usage,
            }
        )
    return Reply(chunks=chunks, chunk_delay=chunk_delay)


class ModelServer:
    """``ThreadingHTTPServer`` on 127.0.0.1 with a free port, run in a daemon thread."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # A short poll interval keeps shutdown (once per test) from costing half a second.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def play(self, *replies: Reply) -> None:
        with self._lock:
            self.script = list(replies)

    def next_reply(self, received: Received) -> Reply:
        with self._lock:
            self.received.append(received)
            if not self.script:
                return Reply(status=500, body={"error": {"message": "no scripted reply"}})
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def start(self) -> ModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler_for(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = server.next_reply(Received(path=self.path, headers=headers, raw=raw))
            time.sleep(reply.delay)
            if reply.chunks is not None:
                self._stream(reply)
                return
            body = reply.body
            if isinstance(body, dict | list):
                body = json.dumps(body)
            payload = body.encode() if isinstance(body, str) else (body or b"")
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing left to answer

        def _stream(self, reply: Reply) -> None:
            self.close_connection = True
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for item in [*(reply.chunks or []), "[DONE]"]:
                    data = item if isinstance(item, str) else json.dumps(item)
                    self.wfile.write(f"data: {data}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(reply.chunk_delay)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            return  # keep test output clean; requests are recorded in server.received

    return Handler
