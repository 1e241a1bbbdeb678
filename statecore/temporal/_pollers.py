"""Whether any worker polls a session's task queue: the few-second check behind "no worker".

A query, or an update the session's workflow must run, waits on the server until a worker
takes it; with none on the queue the caller would wait its whole timeout and then read
Temporal's "no poller seen for task queue recently". Temporal lists the pollers it has seen
on a queue with the time of each one's latest poll; a worker's poll is a long poll of up
to a minute, renewed at once, so a live worker was seen within about a minute.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

#: A poller seen more recently than this counts as a live worker (its long poll lasts up
#: to a minute, and the server records each poll when it starts).
LIVE_POLLER_WITHIN = timedelta(seconds=90)


async def session_task_queue(client: Client, workflow_id: str) -> str:
    """The task queue the session's latest run is on."""
    description = await client.get_workflow_handle(workflow_id).describe()
    return description.task_queue


async def workers_polling(client: Client, task_queue: str) -> int:
    """How many workers Temporal has seen polling ``task_queue`` for workflow tasks lately."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    now = datetime.now(UTC)
    return sum(
        1
        for poller in response.pollers
        if now - poller.last_access_time.ToDatetime(tzinfo=UTC) <= LIVE_POLLER_WITHIN
    )
