"""What a turn that has not answered yet is waiting on, read from Temporal.

A turn's model call is an activity that Temporal retries while it fails as transient (an
endpoint down or overloaded). Temporal keeps, for the pending activity, its attempt number,
the limit, the latest attempt's failure and when the next attempt starts: enough to tell the
caller "the model call failed (attempt 8 of 10: ModelUnavailable: cannot reach ...); next
attempt in 30 s" instead of "no answer yet".
"""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

#: The model call's activity type (statecore.contract._activities.ACT_GENERATE).
MODEL_ACTIVITY = "statecore.generate"


async def waiting_on(handle: WorkflowHandle[object, object]) -> str | None:
    """One line on the session's pending model call, if its latest attempt failed; None when
    nothing failed yet (the model is merely slow) or Temporal cannot say."""
    try:
        description = await handle.describe()
    except RPCError:
        return None
    for pending in description.raw_description.pending_activities:
        if pending.activity_type.name == MODEL_ACTIVITY and pending.HasField("last_failure"):
            return describe_pending(pending)
    return None


def describe_pending(pending: PendingActivityInfo) -> str:
    failure = pending.last_failure
    kind = failure.application_failure_info.type or "error"
    limit = f" of {pending.maximum_attempts}" if pending.maximum_attempts else ""
    text = (
        f"the model call failed (attempt {max(pending.attempt - 1, 1)}{limit}: "
        f"{kind}: {failure.message})"
    )
    if pending.HasField("next_attempt_schedule_time"):
        due = pending.next_attempt_schedule_time.ToDatetime(tzinfo=UTC)
        seconds = max(0.0, (due - datetime.now(UTC)).total_seconds())
        text += f"; next attempt in {seconds:.0f} s"
    return text
