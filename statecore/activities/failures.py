"""The one place where statecore errors become Temporal failures.

A ``StatecoreError`` becomes an ``ApplicationError`` whose ``type`` is the error's stable code,
non-retryable unless the error says a retry can help (bad input never can). Everything else
(driver errors, timeouts) propagates unchanged so Temporal retries it: a database that is
restarting must delay a turn, not fail it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from statecore.core.errors import StatecoreError, validation_message

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def typed_errors(fn: F) -> F:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except StatecoreError as err:
            raise ApplicationError(
                err.message, err.details, type=err.code, non_retryable=not err.retryable
            ) from err
        except ValidationError as err:
            raise ApplicationError(
                validation_message(err), type="InvalidInput", non_retryable=True
            ) from err

    return wrapper  # type: ignore[return-value]
