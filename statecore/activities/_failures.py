"""The one place where statecore errors become Temporal failures.

A ``StatecoreError`` becomes an ``ApplicationError`` whose ``type`` is the error's stable code,
non-retryable unless the error says a retry can help (bad input never can). Everything else
(driver errors, timeouts) propagates unchanged so Temporal retries it: a database that is
restarting must delay a turn, not fail it.

A retryable error that says when to retry (``retry_after_seconds``: a model server's
``Retry-After``) sets the activity's next retry delay, capped at ``MAX_SERVER_RETRY_DELAY`` so a
misconfigured server cannot park a turn for hours.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from statecore.core._errors import StatecoreError, validation_message

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

MAX_SERVER_RETRY_DELAY = timedelta(minutes=5)


def typed_errors(fn: F) -> F:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except StatecoreError as err:
            raise ApplicationError(
                err.message,
                err.details,
                type=err.code,
                non_retryable=not err.retryable,
                next_retry_delay=_server_retry_delay(err),
            ) from err
        except ValidationError as err:
            raise ApplicationError(
                validation_message(err), type="InvalidInput", non_retryable=True
            ) from err

    return wrapper  # type: ignore[return-value]


def _server_retry_delay(err: StatecoreError) -> timedelta | None:
    seconds = err.details.get("retry_after_seconds")
    if not err.retryable or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return None
    return min(timedelta(seconds=max(0.0, seconds)), MAX_SERVER_RETRY_DELAY)
