"""A deterministic OpenAI-compatible chat-completions server for the side-by-side benchmark.

It stands in for the model so both sides of the comparison see the same replies, offline:

- the last message is the user's and the request offers tools: one call of ``get_weather`` for
  the city the user named;
- the last message is a tool result: the answer, built from that result;
- the request offers no tools (a client that runs none): the same answer, from the same
  ``weather`` function the tool uses.

Standard library only, so either side's virtual environment can run it. Run it as a process:

    python -m bench.harness.fake_openai_server --port-file /tmp/port   # writes the port, serves
"""

from __future__ import annotations

import argparse
import json
import re
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOOL_NAME = "get_weather"
_CITY = re.compile(r"weather in ([A-Za-z .'-]+?)[?.!]?$")
_SKIES = ("sunny", "cloudy", "rainy", "windy", "foggy", "clear")
#: The rest of every answer: a reply of a realistic length (about 600 bytes), the same on
#: both sides, so history sizes compare like for like.
_ADVICE = (
    " If you are going out, dress in layers: mornings start cooler than the afternoon, and the"
    " wind near the water makes it feel a few degrees colder than the thermometer says. Carry"
    " an umbrella if the sky turns grey after noon, drink water, and check again before an"
    " evening walk, because conditions at this time of year can change within an hour."
)


def weather(city: str) -> str:
    """What the ``get_weather`` tool returns for ``city``: deterministic, no I/O."""
    code = zlib.crc32(city.encode())
    return f"{city}: {5 + code % 25} C, {_SKIES[code % len(_SKIES)]}"


def answer(tool_result: str) -> str:
    """The model's final answer for a ``get_weather`` result."""
    city, _, conditions = tool_result.partition(": ")
    return f"The weather in {city} right now: {conditions}.{_ADVICE}"


def city_in(text: str) -> str:
    found = _CITY.search(text.strip())
    return found.group(1).strip() if found else "Paris"


def reply_for(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions response to a request body."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {"role": "user", "content": ""}
    content = _text(last.get("content"))
    if last.get("role") == "tool":
        message: dict[str, Any] = {"role": "assistant", "content": answer(content)}
        finish = "stop"
    elif body.get("tools"):
        user_turn = sum(1 for m in messages if m.get("role") == "user")
        call = {
            "id": f"call_{user_turn:06d}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": json.dumps({"city": city_in(content)})},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": answer(weather(city_in(content)))}
        finish = "stop"
    prompt_chars = len(json.dumps(messages))
    completion_chars = len(json.dumps(message))
    return {
        "id": f"chatcmpl-{len(messages)}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model") or "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": completion_chars // 4,
            "total_tokens": (prompt_chars + completion_chars) // 4,
        },
    }


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no such endpoint: {self.path}"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, {"error": {"message": "the body is not JSON"}})
            return
        self._send(200, reply_for(body))

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return


def serve(port: int = 0) -> ThreadingHTTPServer:
    """The server bound on 127.0.0.1 (``port`` 0: a free one); call ``serve_forever``."""
    return ThreadingHTTPServer(("127.0.0.1", port), _Handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path, required=True, help="where to write the port")
    args = parser.parse_args()
    httpd = serve(args.port)
    args.port_file.write_text(str(httpd.server_address[1]))
    httpd.serve_forever()


if __name__ == "__main__":
    main()
