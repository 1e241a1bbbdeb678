"""The workflow of the side-by-side streaming benchmark's official side: one turn whose activity
publishes its tokens through ``temporalio.contrib.workflow_streams`` (kept apart from
bench/streaming_side_by_side.py so the workflow sandbox imports only this)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.contrib.workflow_streams import WorkflowStream

TOPIC = "tokens"
ACTIVITY = "contrib_generate"


@workflow.defn
class ContribStreamedTurn:
    @workflow.init
    def __init__(self, prompt: str) -> None:
        self.stream = WorkflowStream()

    @workflow.run
    async def run(self, prompt: str) -> str:
        reply: str = await workflow.execute_activity(
            ACTIVITY,
            prompt,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3),
        )
        # The end, for subscribers: the committed reply.
        self.stream.topic(TOPIC).publish({"done": reply})
        # Subscribers read until "done"; give them a moment before the run ends.
        await workflow.sleep(timedelta(seconds=1))
        return reply
