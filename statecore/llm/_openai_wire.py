"""Mapping between statecore's model contract and the OpenAI chat-completions wire format.

Pure functions, no I/O, so the mapping is testable on its own and shared by every
OpenAI-compatible server (vLLM, Ollama, LM Studio, hosted APIs). Anything in a response that
cannot become a valid assistant ``Message`` is a ``ModelError``: a reply we cannot store is
never passed on half-parsed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from statecore.core._errors import ModelError, StatecoreError
from statecore.core._models import Message, TokenUsage, ToolCall
from statecore.llm._base import ModelRequest, ModelResponse

#: Set in the reply's metadata when the server sent no usage and it was counted locally.
USAGE_ESTIMATED = "usage_estimated"
_SNIPPET = 500


def request_body(
    request: ModelRequest, model: str, *, token_limit_field: str = "max_tokens"
) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions`` for ``request``; ``request.max_tokens`` goes
    in ``token_limit_field`` (``max_completion_tokens`` for models that refuse ``max_tokens``)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [message_to_wire(m) for m in request.messages],
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body[token_limit_field] = request.max_tokens
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    return body


def message_to_wire(message: Message) -> dict[str, Any]:
    """One message in wire form; ``metadata`` stays with us and is never sent."""
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.name:
        wire["name"] = message.name
    if message.tool_calls:
        # The API allows null content next to tool calls; an empty string is not "no text".
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in message.tool_calls
        ]
    if message.tool_call_id:
        wire["tool_call_id"] = message.tool_call_id
    return wire


def parse_response(
    data: Any,
    *,
    default_model: str,
    estimate_usage: Callable[[Message], TokenUsage],
) -> ModelResponse:
    """Turn a decoded response body into a ``ModelResponse`` or raise ``ModelError``."""
    if not isinstance(data, dict):
        raise ModelError(f"the model server's response is not a JSON object: {_snippet(data)}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ModelError(f"the model server's response has no choices: {_snippet(data)}")
    choice = choices[0]
    wire = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(wire, dict):
        raise ModelError(f"the first choice carries no message: {_snippet(choice)}")
    finish_reason = str(choice.get("finish_reason") or "unknown")
    content = _content(wire.get("content"))
    tool_calls = [_tool_call(i, c) for i, c in enumerate(wire.get("tool_calls") or [])]
    if not content.strip() and not tool_calls:
        refusal = wire.get("refusal")
        why = f"; refusal: {_snippet(refusal)}" if refusal else ""
        raise ModelError(
            f"the model returned an empty reply (finish_reason={finish_reason}{why}); "
            "check max_tokens and the prompt",
            finish_reason=finish_reason,
        )
    try:
        message = Message(role="assistant", content=content, tool_calls=tool_calls)
    except (StatecoreError, ValidationError) as exc:
        raise ModelError(f"the model's reply cannot be stored: {exc}") from exc
    usage = _usage(data.get("usage"))
    if usage is None:
        usage = estimate_usage(message)
        message = message.model_copy(update={"metadata": {USAGE_ESTIMATED: True}})
    return ModelResponse(
        message=message,
        usage=usage,
        finish_reason=finish_reason,
        model=str(data.get("model") or default_model),
    )


def error_text(body: bytes) -> str:
    """The server's own error message from an error response, in the shapes servers use."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return _clip(text) or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return _clip(str(error["message"]))  # OpenAI, vLLM
        for value in (error, data.get("message"), data.get("detail")):
            if value:
                return _clip(value if isinstance(value, str) else json.dumps(value))
    return _clip(text)


def _content(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        # Some servers return content parts; only text parts become the reply.
        return "".join(
            str(p.get("text", "")) for p in value if isinstance(p, dict) and p.get("type") == "text"
        )
    raise ModelError(f"the reply's content is neither text nor parts: {_snippet(value)}")


def _tool_call(index: int, wire: Any) -> ToolCall:
    function = wire.get("function") if isinstance(wire, dict) else None
    if not isinstance(function, dict) or not function.get("name"):
        raise ModelError(f"a tool call in the reply has no function name: {_snippet(wire)}")
    arguments = function.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        # Ollama's native shape: arguments as an object rather than a JSON string.
        arguments = json.dumps(arguments, separators=(",", ":"))
    # Some local servers omit ids; a positional id still pairs the call with its result.
    call_id = wire.get("id") or f"call_{index}"
    try:
        return ToolCall(id=str(call_id), name=str(function["name"]), arguments=arguments)
    except ValidationError as exc:
        raise ModelError(f"a tool call in the reply is invalid: {exc}") from exc


def _usage(value: Any) -> TokenUsage | None:
    if not isinstance(value, dict):
        return None
    prompt, completion = value.get("prompt_tokens"), value.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    try:
        return TokenUsage(prompt_tokens=prompt, completion_tokens=completion)
    except ValidationError as exc:
        raise ModelError(f"the reply's usage is invalid: {_snippet(value)}") from exc


def _snippet(value: Any) -> str:
    try:
        text = value if isinstance(value, str) else json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return _clip(text)


def _clip(text: str) -> str:
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"
