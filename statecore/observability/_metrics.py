"""statecore's own metrics, recorded through Temporal's metric meter.

Activities pass ``activity.metric_meter()`` and workflow code ``workflow.metric_meter()``, so
statecore's metrics land wherever the worker's Temporal runtime sends its own (the Prometheus
endpoint of ``worker.py --metrics-port``) with the same labels (namespace, task queue,
activity or workflow type). Without a metrics runtime the meter is a no-op. The workflow meter
records nothing while a workflow replays, so calling it from workflow code is deterministic.

| name | kind | labels | what |
|---|---|---|---|
| ``statecore_turns`` | counter | | turns committed (a duplicate turn id counts once) |
| ``statecore_tokens`` | counter | ``kind`` = prompt, completion | model tokens of committed turns |
| ``statecore_turn_duration`` | histogram (ms) | | worker time of the activity that
  completes a turn: context assembly, model call, commit |
| ``statecore_compactions`` | counter | ``strategy`` | compactions that moved the window |
| ``statecore_rejections`` | counter | ``operation``, ``code`` | requests a session refused |

Only temporalio and statecore's models are imported: workflow code may use this module.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import MetricMeter

from statecore.core._models import TokenUsage

TURNS = "statecore_turns"
TOKENS = "statecore_tokens"
TURN_DURATION = "statecore_turn_duration"
COMPACTIONS = "statecore_compactions"
REJECTIONS = "statecore_rejections"

METRIC_NAMES = (TURNS, TOKENS, TURN_DURATION, COMPACTIONS, REJECTIONS)


def record_turn(meter: MetricMeter, usage: TokenUsage, duration: timedelta) -> None:
    """One committed turn: its count, its model tokens by kind, how long it took."""
    meter.create_counter(TURNS, "Turns committed.").add(1)
    tokens = meter.create_counter(TOKENS, "Model tokens of committed turns, by kind.", "tokens")
    if usage.prompt_tokens:
        tokens.add(usage.prompt_tokens, {"kind": "prompt"})
    if usage.completion_tokens:
        tokens.add(usage.completion_tokens, {"kind": "completion"})
    meter.create_histogram_timedelta(
        TURN_DURATION,
        "Worker time of the activity completing a turn (context, model call, commit).",
        "duration",
    ).record(max(duration, timedelta(0)))


def record_compaction(meter: MetricMeter, strategy: str) -> None:
    meter.create_counter(COMPACTIONS, "Compactions that moved the window, by strategy.").add(
        1, {"strategy": strategy}
    )


def record_rejection(meter: MetricMeter, operation: str, code: str) -> None:
    meter.create_counter(REJECTIONS, "Requests a session refused, by operation and code.").add(
        1, {"operation": operation, "code": code}
    )
