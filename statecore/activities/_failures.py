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
import json
import logging
import math
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from statecore.core._errors import StatecoreError, validation_message

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

MAX_SERVER_RETRY_DELAY = timedelta(minutes=5)
#: Temporal records a pending activity's last failure only up to a few KB (the server's
#: ``limit.activityFailureSize``); a failure's message and details stay well inside that.
MAX_FAILURE_MESSAGE_CHARS = 1000
MAX_FAILURE_DETAILS_BYTES = 1000

log = logging.getLogger("statecore.activities")


def typed_errors(fn: F) -> F:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except StatecoreError as err:
            failure = ApplicationError(
                _fit(err.message),
                _small_details(err.details),
                type=err.code,
                non_retryable=not err.retryable,
                next_retry_delay=_server_retry_delay(err),
            )
            if not err.retryable:
                raise failure from err
            # Temporal keeps a retried attempt's failure only while it fits a few KB (else
            # it records "Failure exceeds size limit." in its place); the driver's chain of
            # causes and their stack traces would not. The message names the cause; the
            # worker's log has the chain.
            log.warning("%s (attempt will be retried): %s", err.code, err.message, exc_info=err)
            raise failure from None
        except ValidationError as err:
            raise ApplicationError(
                validation_message(err), type="InvalidInput", non_retryable=True
            ) from err

    return wrapper  # type: ignore[return-value]


def _fit(message: str) -> str:
    """A failure's message, cut to MAX_FAILURE_MESSAGE_CHARS."""
    if len(message) <= MAX_FAILURE_MESSAGE_CHARS:
        return message
    return message[: MAX_FAILURE_MESSAGE_CHARS - 20] + " ... (cut)"


def _small_details(details: dict[str, Any]) -> dict[str, Any]:
    """The error's details, or only their names when they would not fit a failure."""
    try:
        size = len(json.dumps(details, default=str))
    except (TypeError, ValueError):
        size = MAX_FAILURE_DETAILS_BYTES + 1
    if size <= MAX_FAILURE_DETAILS_BYTES:
        return details
    return {"omitted": sorted(details)}


def _server_retry_delay(err: StatecoreError) -> timedelta | None:
    seconds = err.details.get("retry_after_seconds")
    if not err.retryable or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return None
    return min(timedelta(seconds=max(0.0, seconds)), MAX_SERVER_RETRY_DELAY)
