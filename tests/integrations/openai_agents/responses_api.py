"""A local, deterministic stand-in for the OpenAI Responses API (``/v1/responses`` and
``/v1/responses/compact``), on 127.0.0.1, for running the SDK's examples offline.

Replies depend only on what the request carries, so two runs that send the same inputs get
the same replies, and a run whose session lost or reordered history gets different ones:

- the newest input item is a tool's output: a message quoting it;
- the request forces a function tool (``tool_choice``) and the newest item is a user
  message: a call of that tool with the message as its first required argument;
- the agent has function tools and the newest user message asks about a place ("... in
  Oakland?"): a call of the first tool with that place as its first required argument;
- otherwise: a message naming how many items and user messages the input held and echoing
  the newest user message.

``/responses/compact`` returns the input's user messages and one compaction item. Every
request is recorded (path and JSON body), in order.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_PLACE = re.compile(r"\bin ([A-Z][\w ]*?)[?.!]*$")
_USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 15,
}


class ResponsesAPI:
    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self._count = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ResponsesAPI:
        self._thread.start()
        return self

    def reset(self) -> None:
        """Forget what was asked, and number replies from 1 again."""
        with self._lock:
            self.requests = []
            self._count = 0

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, path: str, body: Any) -> dict[str, Any]:
        with self._lock:
            self.requests.append((path, body))
            self._count += 1
            n = self._count
        items = _as_items(body.get("input"))
        if path.endswith("/responses/compact"):
            return _compacted(n, items)
        return _response(n, body, items)


def _as_items(raw: Any) -> list[dict[str, Any]]:
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return [item for item in raw or [] if isinstance(item, dict)]


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") for p in content or [] if isinstance(p, dict)]
    return " ".join(p for p in parts if p)


def _is_user(item: dict[str, Any]) -> bool:
    return item.get("role") == "user" and item.get("type", "message") == "message"


def _response(n: int, body: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
    users = [item for item in items if _is_user(item)]
    newest = items[-1] if items else {}
    tools = [t for t in body.get("tools") or [] if t.get("type") == "function"]
    place = _PLACE.search(_text(users[-1]).strip()) if users else None
    choice = body.get("tool_choice")
    forced = [t for t in tools if isinstance(choice, dict) and t["name"] == choice.get("name")]
    output: dict[str, Any]
    if newest.get("type") == "function_call_output":
        output = _message(n, f"The tool said: {newest.get('output')}")
    elif forced and _is_user(newest):
        output = _call(n, forced[0], _text(newest))
    elif tools and place and _is_user(newest):
        output = _call(n, tools[0], place.group(1))
    else:
        said = _text(users[-1]) if users else ""
        output = _message(n, f"Reply {len(users)} to {len(items)} items: {said}")
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": body.get("model") or "gpt-4.1",
        "status": "completed",
        "output": [output],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "usage": _USAGE,
    }


def _call(n: int, tool: dict[str, Any], value: str) -> dict[str, Any]:
    required = (tool.get("parameters") or {}).get("required") or ["input"]
    return {
        "type": "function_call",
        "id": f"fc_{n}",
        "call_id": f"call_{n}",
        "name": tool["name"],
        "arguments": json.dumps({required[0]: value}),
        "status": "completed",
    }


def _message(n: int, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{n}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _compacted(n: int, items: list[dict[str, Any]]) -> dict[str, Any]:
    users = [
        {
            "type": "message",
            "id": f"cu_{n}_{i}",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_text", "text": _text(item)}],
        }
        for i, item in enumerate(items)
        if _is_user(item)
    ]
    summary = {
        "type": "compaction",
        "id": f"cmp_{n}",
        "encrypted_content": f"compacted {len(items)} items",
    }
    return {
        "id": f"compact_{n}",
        "object": "response.compaction",
        "created_at": 1_700_000_000,
        "output": [*users, summary],
        "usage": _USAGE,
    }


def _handler_for(api: ResponsesAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                payload = json.dumps(api.answer(self.path, json.loads(raw))).encode()
                status = 200
            except Exception as exc:  # a malformed request: say so, as the API would
                payload = json.dumps({"error": {"message": repr(exc)}}).encode()
                status = 400
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
