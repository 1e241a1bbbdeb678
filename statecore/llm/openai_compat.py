"""A client for any OpenAI-compatible ``/chat/completions`` endpoint.

Works with vLLM, Ollama, LM Studio and hosted APIs. Failures split in two, because the
Temporal activity that wraps this client decides by the error type whether to retry:

* 408, 429, 5xx, connection errors and timeouts are transient. They are retried here with
  exponential backoff (honouring ``Retry-After``); after the last attempt the call raises
  ``ModelUnavailableError``, which is retryable, so the activity's retry policy takes over.
* Any other 4xx (bad request, auth, unknown model) and a response we cannot parse raise
  ``ModelError`` at once: repeating the same request cannot succeed.

The API key comes from the caller (the library reads no environment); it is sent only in the
``Authorization`` header and never appears in logs, ``repr`` or error messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any

import httpx

from statecore.core.errors import InvalidInputError, ModelError, ModelUnavailableError
from statecore.core.model_windows import context_window_for
from statecore.core.models import Message, TokenUsage
from statecore.core.profile import check_limit
from statecore.core.tokens import MESSAGE_OVERHEAD, TokenCounter
from statecore.llm.base import ModelRequest, ModelResponse
from statecore.llm.openai_wire import error_text, parse_response, request_body

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = frozenset({408, 429})


class OpenAICompatibleModel:
    """Chat model served over HTTP by an OpenAI-compatible server.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:11434/v1``; ``/chat/completions`` is
            appended.
        api_key: sent as ``Authorization: Bearer <key>``; None for servers without auth.
        model: the model name the server knows.
        timeout_seconds: deadline of one attempt, connect to last byte.
        max_retries: transient failures retried after the first attempt.
        backoff_seconds: first retry delay; doubles per retry, capped at ``max_backoff_seconds``.
        max_retry_after_seconds: a ``Retry-After`` longer than this is not waited out here:
            the call fails with ``ModelUnavailableError`` at once and the activity retries later.
        http_client: a client to share; this object closes only a client it created.
        context_window: the model's window in tokens; by default looked up by ``model`` in
            ``statecore.core.model_windows`` (None when the name is unknown). A session
            without ``profile.max_tokens`` gets this window less room for the reply.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str,
        timeout_seconds: float = 60,
        max_retries: int = 3,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 30,
        max_retry_after_seconds: float = 60,
        http_client: httpx.AsyncClient | None = None,
        context_window: int | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise InvalidInputError(f"base_url must start with http:// or https://: {base_url!r}")
        if not model.strip():
            raise InvalidInputError("model must name the model the server serves")
        if api_key is not None and (not api_key or any(ch.isspace() for ch in api_key)):
            raise InvalidInputError(
                "api_key is empty or contains whitespace; pass None for servers without auth"
            )
        if timeout_seconds <= 0 or max_retries < 0 or backoff_seconds < 0:
            raise InvalidInputError(
                "timeout_seconds must be > 0, max_retries and backoff_seconds >= 0"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        if context_window is not None:
            check_limit(context_window, "context_window")
        self.context_window = context_window or context_window_for(model)
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.max_retry_after_seconds = max_retry_after_seconds
        self._api_key = api_key
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient()
        self._counter: TokenCounter | None = None

    def __repr__(self) -> str:
        auth = "with key" if self._api_key else "no key"
        return f"OpenAICompatibleModel({self.base_url!r}, model={self.model!r}, {auth})"

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client:
            await self._client.aclose()

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
        """Send ``request``; retry transient failures; raise ``ModelError`` or
        ``ModelUnavailableError`` as described in the module docstring."""
        url = f"{self.base_url}/chat/completions"
        body = request_body(request, self.model)
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                data = await self._post(url, body, headers)
            except _TransientFailure as failure:
                self._raise_if_exhausted(failure, attempt, attempts)
                delay = self._delay(attempt, failure.retry_after)
                logger.warning(
                    "model call to %s failed (%s); retry %d of %d in %.2fs",
                    url, failure.reason, attempt, self.max_retries, delay,
                )  # fmt: skip
                await asyncio.sleep(delay)
                continue
            return parse_response(
                data,
                default_model=self.model,
                estimate_usage=lambda reply: self._estimate_usage(request, reply),
            )
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _post(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
        """One attempt: the decoded JSON body, ``_TransientFailure`` or ``ModelError``."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                response = await self._client.post(
                    url, json=body, headers=headers, timeout=self.timeout_seconds
                )
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise _TransientFailure(f"no response within {self.timeout_seconds}s") from exc
        except httpx.TransportError as exc:
            raise _TransientFailure(f"{type(exc).__name__}: {self._redact(str(exc))}") from exc
        status = response.status_code
        server_says = self._redact(error_text(response.content))
        if status in _RETRYABLE_STATUS or status >= 500:
            retry_after = _retry_after(response.headers.get("Retry-After"))
            raise _TransientFailure(f"HTTP {status}: {server_says}", retry_after, status)
        if status >= 400:
            raise ModelError(
                f"{self.name} rejected the request with HTTP {status}: {server_says}",
                status_code=status,
            )
        if not 200 <= status < 300:
            raise ModelError(f"{self.name} answered with HTTP {status}", status_code=status)
        try:
            return json.loads(response.content)
        except ValueError as exc:
            raise ModelError(
                f"{self.name} answered HTTP {status} with a body that is not JSON: {server_says}",
                status_code=status,
            ) from exc

    def _raise_if_exhausted(self, failure: _TransientFailure, attempt: int, attempts: int) -> None:
        where = f"{self.name} at {self.base_url}"
        if failure.retry_after is not None and failure.retry_after > self.max_retry_after_seconds:
            raise ModelUnavailableError(
                f"{where} is unavailable ({failure.reason}) and asks to retry after "
                f"{failure.retry_after:.0f}s; the call will be retried later",
                status_code=failure.status,
                retry_after_seconds=failure.retry_after,
                attempts=attempt,
            )
        if attempt == attempts:
            raise ModelUnavailableError(
                f"{where} is unavailable after {attempts} attempts ({failure.reason}); "
                "check the server, the call will be retried later",
                status_code=failure.status,
                attempts=attempts,
            )

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        # Jitter spreads retries of many workers hitting the same overloaded server.
        backoff = self.backoff_seconds * 2 ** (attempt - 1) * random.uniform(0.8, 1.2)
        backoff = min(backoff, self.max_backoff_seconds)
        return max(backoff, retry_after or 0.0)

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


class _TransientFailure(Exception):
    """An attempt failed in a way a later attempt may not: retried, never raised to callers."""

    def __init__(self, reason: str, retry_after: float | None = None, status: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.status = status


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
