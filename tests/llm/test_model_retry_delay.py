"""A model server's Retry-After becomes the activity's next retry delay, within a cap."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError

from statecore.activities._failures import MAX_SERVER_RETRY_DELAY, typed_errors
from statecore.core._errors import ModelError, ModelUnavailableError


async def fail_with(err: Exception) -> ApplicationError:
    @typed_errors
    async def call() -> None:
        raise err

    with pytest.raises(ApplicationError) as caught:
        await call()
    return caught.value


@pytest.mark.parametrize(
    ("seconds", "delay"),
    [(7, timedelta(seconds=7)), (0.5, timedelta(seconds=0.5)), (86400, MAX_SERVER_RETRY_DELAY)],
)
async def test_retry_after_sets_the_next_retry_delay(seconds, delay):
    failure = await fail_with(ModelUnavailableError("busy", retry_after_seconds=seconds))
    assert failure.type == "ModelUnavailable"
    assert failure.non_retryable is False
    assert failure.next_retry_delay == delay


async def test_without_retry_after_the_retry_policy_decides():
    failure = await fail_with(ModelUnavailableError("down", status_code=503))
    assert failure.next_retry_delay is None


async def test_a_non_retryable_error_gets_no_retry_delay():
    failure = await fail_with(ModelError("bad request", retry_after_seconds=5))
    assert failure.non_retryable is True
    assert failure.next_retry_delay is None
