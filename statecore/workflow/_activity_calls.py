"""How workflow code calls statecore's activities: retry policies and error translation.

Bad input and errors a retry cannot fix fail fast with their typed code; everything else
(a database restarting, a worker dying, a model endpoint overloaded) is retried patiently, so
outages delay a turn instead of failing it. Sandbox-safe: temporalio and pure modules only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from pydantic import ValidationError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from statecore.core._errors import (
    ERRORS_BY_CODE,
    MigrationError,
    StatecoreError,
    validation_message,
)

#: Error codes that no retry can fix: the activity fails at once and the caller sees them.
#: Derived from the error tree so a new error type cannot be forgotten here. The root type
#: (an unexpected condition) and an out-of-date schema (fixed by running the migration while
#: the turn waits) stay retryable.
NON_RETRYABLE_CODES = sorted(
    code
    for code, cls in ERRORS_BY_CODE.items()
    if not cls.retryable and cls not in (StatecoreError, MigrationError)
)

#: SQL work: short, retried patiently so a database restart does not fail the turn.
SQL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=5),
    non_retryable_error_types=NON_RETRYABLE_CODES,
)
#: Model calls: the model endpoint may be slow or rate-limited. A regular activity's retry
#: policy is written to history with every call, and the list of codes is ~600 bytes of a
#: ~4 KB turn; the activities already fail those codes as non-retryable
#: (statecore.activities._failures).
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
)


def model_retry_policy(attempts: int) -> RetryPolicy:
    """MODEL_RETRY, limited to ``attempts`` tries of the call."""
    return dataclasses.replace(MODEL_RETRY, maximum_attempts=attempts)



T = TypeVar("T")


def refusal(code: str, message: str, *, retryable: bool = False) -> ApplicationError:
    """A typed refusal for the caller of a handler or a turn: the one shape every failure
    raised from workflow code takes.

    Anything but an ApplicationError raised from a handler fails the workflow task, which
    Temporal retries forever: the workflow would take no more turns."""
    return ApplicationError(message, type=code, non_retryable=not retryable)


def bad_input(err: StatecoreError | ValidationError) -> ApplicationError:
    """Bad input found in workflow code, as the typed refusal its caller should see."""
    if isinstance(err, ValidationError):
        return refusal("InvalidInput", validation_message(err))
    return refusal(err.code, err.message)


def checked(build: Callable[[], T]) -> T:
    """Run ``build`` (a model constructor, a validator); bad input becomes a typed failure."""
    try:
        return build()
    except (StatecoreError, ValidationError) as err:
        raise bad_input(err) from err


def reraise_activity_error(err: ActivityError) -> ApplicationError:
    """Turn a failed activity into the typed ApplicationError its caller should see.

    Raising ApplicationError from an update handler fails that update only; any other
    exception would fail the workflow task and wedge the session."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return ApplicationError(
            cause.message, *cause.details, type=cause.type, non_retryable=cause.non_retryable
        )
    return refusal("ActivityFailed", str(cause or err))


def failure_reason(err: ActivityError) -> str:
    """What went wrong in a failed activity, in one message (for a model or a report)."""
    cause = err.cause
    return cause.message if isinstance(cause, ApplicationError) else str(cause or err)
