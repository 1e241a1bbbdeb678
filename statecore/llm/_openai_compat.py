"""A client for any OpenAI-compatible ``/chat/completions`` endpoint, on the ``openai`` SDK.

Works with vLLM, Ollama, LM Studio and hosted APIs. Needs the ``openai`` extra
(``pip install 'statecore[openai]'``); statecore imports without it, and only constructing this
client asks for it. The SDK does the transport (connection pooling, timeouts, headers); the
wire mapping and the error mapping stay statecore's, because the Temporal activity that wraps
this client decides by the error type whether to retry:

* 408, 429, 5xx, connection errors and timeouts are transient: ``ModelUnavailableError``,
  which is retryable. A ``Retry-After`` the server sent travels with it
  (``retry_after_seconds``), and the activity waits that long before its next attempt.
* Any other 4xx (bad request, auth, unknown model) and a response we cannot parse raise
  ``ModelError``: repeating the same request cannot succeed.

The API key comes from the caller: the SDK's own environment lookups (``OPENAI_API_KEY``,
``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``) are neutralised, so what the server receives is what
the caller configured. The key is sent only in the ``Authorization`` header and never appears
in logs, ``repr`` or error messages.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from statecore.core._errors import (
    InvalidInputError,
    ModelError,
    ModelUnavailableError,
    StatecoreError,
)
from statecore.core._model_windows import context_window_for
from statecore.core._models import Message, TokenUsage
from statecore.core._profile import check_limit
from statecore.core._tokens import MESSAGE_OVERHEAD, TokenCounter
from statecore.llm._base import (
    ModelRequest,
    ModelResponse,
    StreamItem,
    TextDelta,
    ToolCallDelta,
)
from statecore.llm._openai_wire import error_text, parse_response, request_body

if TYPE_CHECKING:
    from openai import APIStatusError, AsyncOpenAI

_RETRYABLE_STATUS = frozenset({408, 429})

#: Model families that refuse ``max_tokens`` and take ``max_completion_tokens`` instead (the
#: o-series reasoning models and GPT-5), with or without a provider prefix ("openai/o3-mini").
_COMPLETION_TOKENS_MODELS = re.compile(r"(^|/)(o\d|gpt-5)", re.IGNORECASE)

TokenLimitField = Literal["max_tokens", "max_completion_tokens"]

# Sent instead of a key to a server without auth: the SDK insists on some key (or reads
# OPENAI_API_KEY), and the Authorization header it would build is removed again below.
_NO_KEY = "unused"


def default_token_limit_field(model: str) -> TokenLimitField:
    """The request field that caps a reply's length for ``model``: ``max_completion_tokens``
    for the families that refuse ``max_tokens``, ``max_tokens`` (which every compatible server
    knows) otherwise."""
    return "max_completion_tokens" if _COMPLETION_TOKENS_MODELS.search(model) else "max_tokens"


class OpenAICompatibleModel:
    """Chat model served over HTTP by an OpenAI-compatible server.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:11434/v1``; ``/chat/completions`` is
            appended.
        api_key: sent as ``Authorization: Bearer <key>``; None for servers without auth (no
            header is sent, and ``OPENAI_API_KEY`` is not read).
        model: the model name the server knows.
        timeout_seconds: deadline of one call, connect to last byte.
        max_retries: transient failures the SDK retries inside one call. 0 by default: in a
            worker, a ``ModelUnavailableError`` fails the activity attempt and Temporal's retry
            policy retries it with backoff, so retries here would multiply with those, hold
            the activity slot through the backoff and keep the outage out of the workflow's
            history. Raise it when calling the client outside Temporal.
        token_limit_field: which field carries ``ModelRequest.max_tokens``; by default chosen
            from the model name (see ``default_token_limit_field``).
        context_window: the model's window in tokens; by default looked up by ``model`` in
            ``statecore.core._model_windows`` (None when the name is unknown). A session
            without ``profile.max_tokens`` gets this window less room for the reply.
        streams: turns call ``stream`` (``"stream": true``, with
            ``stream_options.include_usage``), so readers see the reply as it is generated
            (docs/streaming.md). Off by default: some compatible servers refuse
            ``stream_options``; ``stream`` itself works either way.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str,
        timeout_seconds: float = 60,
        max_retries: int = 0,
        token_limit_field: TokenLimitField | None = None,
        context_window: int | None = None,
        streams: bool = False,
    ) -> None:
        if not isinstance(streams, bool):
            raise InvalidInputError(f"streams must be True or False, not {streams!r}")
        self.streams = streams
        if not base_url.startswith(("http://", "https://")):
            raise InvalidInputError(f"base_url must start with http:// or https://: {base_url!r}")
        if not model.strip():
            raise InvalidInputError("model must name the model the server serves")
        if api_key is not None and (not api_key or any(ch.isspace() for ch in api_key)):
            raise InvalidInputError(
                "api_key is empty or contains whitespace; pass None for servers without auth"
            )
        if timeout_seconds <= 0 or max_retries < 0:
            raise InvalidInputError("timeout_seconds must be > 0 and max_retries >= 0")
        if token_limit_field not in (None, "max_tokens", "max_completion_tokens"):
            raise InvalidInputError(
                "token_limit_field must be 'max_tokens', 'max_completion_tokens' or None, "
                f"not {token_limit_field!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        if context_window is not None:
            check_limit(context_window, "context_window")
        self.context_window = context_window or context_window_for(model)
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.token_limit_field: TokenLimitField = token_limit_field or default_token_limit_field(
            model
        )
        self._api_key = api_key
        self._client, self._dropped_headers = _sdk_client(
            self.base_url, api_key, timeout_seconds, max_retries
        )
        self._counter: TokenCounter | None = None

    def __repr__(self) -> str:
        auth = "with key" if self._api_key else "no key"
        return f"OpenAICompatibleModel({self.base_url!r}, model={self.model!r}, {auth})"

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        await self._client.close()

    async def __aenter__(self) -> OpenAICompatibleModel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request``; raise ``ModelError`` or ``ModelUnavailableError`` as described in
        the module docstring."""
        body = request_body(request, self.model, token_limit_field=self.token_limit_field)
        data = await self._post(body)
        return parse_response(
            data,
            default_model=self.model,
            estimate_usage=lambda reply: self._estimate_usage(request, reply),
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Send ``request`` with ``"stream": true``: each text delta as it arrives, then the
        tool calls, then the whole response, parsed and checked as ``complete``'s is. The
        errors are ``complete``'s; ``timeout_seconds`` bounds the whole stream."""
        import openai

        body = request_body(request, self.model, token_limit_field=self.token_limit_field)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_seconds
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        last: dict[str, Any] = {}
        finish_reason: str | None = None
        usage: Any = None
        try:
            async with asyncio.timeout_at(deadline):
                chunks = await self._client.chat.completions.create(
                    **body, extra_headers=self._dropped_headers
                )
            iterator = chunks.__aiter__()
            while True:
                async with asyncio.timeout_at(deadline):
                    try:
                        chunk = await iterator.__anext__()
                    except StopAsyncIteration:
                        break
                data = chunk.model_dump(exclude_none=True)
                last = data
                usage = data.get("usage") or usage
                for choice in data.get("choices") or []:
                    if choice.get("index", 0) != 0:
                        continue
                    finish_reason = choice.get("finish_reason") or finish_reason
                    delta = choice.get("delta") or {}
                    piece = delta.get("content")
                    if isinstance(piece, str) and piece:
                        text.append(piece)
                        yield TextDelta(piece)
                    for call in delta.get("tool_calls") or []:
                        _merge_call(calls.setdefault(int(call.get("index", 0)), {}), call)
        except (TimeoutError, openai.APITimeoutError) as exc:
            raise self._unavailable(f"no whole response within {self.timeout_seconds}s") from exc
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            reason = f"{type(cause).__name__}: {self._redact(str(cause))}"
            raise self._unavailable(reason) from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"{self.name} call failed: {self._redact(str(exc))}") from exc
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        response = parse_response(
            {
                "choices": [{"message": message, "finish_reason": finish_reason}],
                "usage": usage,
                "model": last.get("model"),
            },
            default_model=self.model,
            estimate_usage=lambda reply: self._estimate_usage(request, reply),
        )
        for tool_call in response.message.tool_calls:
            yield ToolCallDelta(tool_call)
        yield response

    async def _post(self, body: dict[str, Any]) -> Any:
        """One call through the SDK: the decoded JSON body, or a typed error.

        The raw body is parsed by ``openai_wire`` rather than the SDK's models, which some
        compatible servers' replies do not fit (arguments as objects, content as parts)."""
        import openai

        try:
            # The SDK's timeout bounds each phase (connect, read, ...); this bounds the whole
            # call, so a server that trickles bytes cannot hold a turn past its deadline.
            async with asyncio.timeout(self.timeout_seconds):
                raw = await self._client.chat.completions.with_raw_response.create(
                    **body, extra_headers=self._dropped_headers
                )
                content = raw.content
        except (TimeoutError, openai.APITimeoutError) as exc:
            raise self._unavailable(f"no response within {self.timeout_seconds}s") from exc
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            reason = f"{type(cause).__name__}: {self._redact(str(cause))}"
            raise self._unavailable(reason) from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"{self.name} call failed: {self._redact(str(exc))}") from exc
        try:
            return json.loads(content)
        except ValueError as exc:
            raise ModelError(
                f"{self.name} answered with a body that is not JSON: "
                f"{self._redact(error_text(content))}",
                status_code=raw.status_code,
            ) from exc

    def _status_error(self, exc: APIStatusError) -> StatecoreError:
        status = exc.status_code
        server_says = self._redact(error_text(exc.response.content))
        if status in _RETRYABLE_STATUS or status >= 500:
            retry_after = _retry_after(exc.response.headers.get("retry-after"))
            return self._unavailable(
                f"HTTP {status}: {server_says}", status_code=status, retry_after=retry_after
            )
        return ModelError(
            f"{self.name} rejected the request with HTTP {status}: {server_says}",
            status_code=status,
        )

    def _unavailable(
        self, reason: str, *, status_code: int | None = None, retry_after: float | None = None
    ) -> ModelUnavailableError:
        details: dict[str, Any] = {"status_code": status_code}
        if retry_after is not None:
            details["retry_after_seconds"] = retry_after
        return ModelUnavailableError(
            f"{self.name} at {self.base_url} is unavailable ({reason}); "
            "the call will be retried later",
            **details,
        )

    def _estimate_usage(self, request: ModelRequest, reply: Message) -> TokenUsage:
        # Only when the server reports no usage: counted locally so token totals stay honest.
        if self._counter is None:
            self._counter = TokenCounter()
        return TokenUsage(
            prompt_tokens=self._counter.count_messages(request.messages),
            completion_tokens=self._counter.count_message(reply) - MESSAGE_OVERHEAD,
        )

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text


def _merge_call(into: dict[str, Any], delta: dict[str, Any]) -> None:
    """Add one streamed piece of a tool call (its id, name and a slice of its arguments)."""
    if delta.get("id"):
        into["id"] = delta["id"]
    into.setdefault("type", "function")
    function = into.setdefault("function", {"name": "", "arguments": ""})
    piece = delta.get("function") or {}
    if piece.get("name"):
        function["name"] += piece["name"]
    if piece.get("arguments"):
        function["arguments"] += piece["arguments"]


def _sdk_client(
    base_url: str, api_key: str | None, timeout_seconds: float, max_retries: int
) -> tuple[AsyncOpenAI, dict[str, Any]]:
    """The SDK client, and the headers each request drops: those the SDK would fill from the
    environment and, without a key, the placeholder's ``Authorization`` (``Omit()`` in a
    request's headers removes a header)."""
    try:
        from openai import AsyncOpenAI, Omit
    except ImportError as exc:  # an optional extra, needed only once a client is built
        raise StatecoreError(
            "OpenAICompatibleModel needs the openai package: install statecore with the openai "
            "extra (pip install 'statecore[openai]')"
        ) from exc
    dropped: dict[str, Any] = {"OpenAI-Organization": Omit(), "OpenAI-Project": Omit()}
    if api_key is None:
        dropped["Authorization"] = Omit()
    client = AsyncOpenAI(
        base_url=base_url,
        api_key=api_key or _NO_KEY,
        timeout=timeout_seconds,
        max_retries=max_retries,
    )
    return client, dropped


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # an unreadable header means "no advice": the normal backoff applies
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
