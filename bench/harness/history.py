"""Workflow history of a long session, per run and per turn, read back through the client.

Method (see bench/README.md):

- The runs of a session are found by following the chain from the first run: each run's last
  event, ``WorkflowExecutionContinuedAsNew``, names the next run.
- Per run, ``describe()`` gives the server's own ``history_size_bytes`` and ``history_length``
  (the numbers the 50 MiB / 51,200-event limits apply to), and ``fetch_history()`` gives the
  events themselves.
- Per turn, the events are cut at each ``WorkflowExecutionUpdateCompleted``: a turn owns every
  event after the previous turn's completion up to and including its own (the workflow task
  that accepted it, the accepted event, the activity, the search-attribute upsert, the
  completion). Each event is measured as its serialized protobuf size. The first turn of a run
  also carries that run's start (its input holds the carried-over checkpoint); the events
  after the last completion of a run (the continue-as-new) belong to no turn and are reported
  as the run's tail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
_CONTINUED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW


@dataclass
class RunHistory:
    run_id: str
    turns: int
    history_length: int
    history_size_bytes: int
    event_bytes: int
    tail_bytes: int

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "turns": self.turns,
            "history_length": self.history_length,
            "history_size_bytes": self.history_size_bytes,
            "event_bytes": self.event_bytes,
            "tail_bytes": self.tail_bytes,
            "history_bytes_per_turn": round(self.history_size_bytes / self.turns, 1)
            if self.turns
            else None,
        }


@dataclass
class SessionHistory:
    runs: list[RunHistory] = field(default_factory=list)
    #: update id (the turn id) -> history bytes of that turn
    bytes_by_update: dict[str, int] = field(default_factory=dict)
    #: update id -> index of the run it completed in
    run_by_update: dict[str, int] = field(default_factory=dict)


async def session_history(client: Client, workflow_id: str) -> SessionHistory:
    """Every run of ``workflow_id`` from the first, with per-turn history bytes."""
    latest = await client.get_workflow_handle(workflow_id).describe()
    run_id: str | None = latest.raw_description.workflow_execution_info.first_run_id or (
        latest.run_id
    )
    out = SessionHistory()
    while run_id:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        info = (await handle.describe()).raw_description.workflow_execution_info
        history = await handle.fetch_history()
        pending = 0
        turns = 0
        total = 0
        next_run: str | None = None
        for event in history.events:
            size = event.ByteSize()
            total += size
            pending += size
            if event.event_type == _COMPLETED:
                done = event.workflow_execution_update_completed_event_attributes
                update_id = done.meta.update_id
                out.bytes_by_update[update_id] = pending
                out.run_by_update[update_id] = len(out.runs)
                pending = 0
                turns += 1
            elif event.event_type == _CONTINUED:
                continued = event.workflow_execution_continued_as_new_event_attributes
                next_run = continued.new_execution_run_id
        out.runs.append(
            RunHistory(
                run_id=run_id,
                turns=turns,
                history_length=info.history_length,
                history_size_bytes=info.history_size_bytes,
                event_bytes=total,
                tail_bytes=pending,
            )
        )
        run_id = next_run
    return out
