"""What the side-by-side benchmarks measure, the same way on both sides.

Imports only temporalio and ``bench.harness.history``, so the official integration's separate
environment runs it too. Per side: the latency of every turn as the caller sees it (one
update, start to result), the workflow history every turn adds (``bench.harness.history``:
events cut at each ``WorkflowExecutionUpdateCompleted``, each measured as its serialized size), the
history in total (the server's ``history_size_bytes``, summed over runs), the largest payload
any activity was scheduled with, and, if a turn fails, why: the run's status, the server's
termination reason, the workflow-task failures it recorded.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client

from bench.harness.history import session_history

ROOT = Path(__file__).resolve().parents[2]
MODEL = "fake-model"
INSTRUCTIONS = "You are a weather assistant. Use get_weather for every city asked about."
CITIES = ("Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Quebec", "Tunis", "Perth", "Riga")
#: Turns at which the report gives history bytes (those the session reached).
CHECKPOINTS = (10, 100, 300)
#: Longest a turn may take before the run counts as stuck and stops.
TURN_TIMEOUT_SECONDS = 180.0

_SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
_TASK_FAILED = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
_TERMINATED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED

SendTurn = Callable[[int, str, str], Awaitable[str]]


def prompt(n: int) -> str:
    """The user's message of turn ``n``: the same on both sides."""
    return f"Turn {n}: what is the weather in {CITIES[n % len(CITIES)]}?"


def turn_id(n: int) -> str:
    return f"turn-{n:05d}"


async def drive(
    send: SendTurn, turns: int, *, label: str, minutes: float | None = None
) -> tuple[list[float], str | None, str]:
    """Send turns 1..``turns`` one after another; stop at the first failure, or before a turn
    that would start after ``minutes`` (a run cap for a side whose turns keep slowing).

    Returns each turn's latency (seconds), what stopped the run early (or None) and the last
    reply."""
    latencies: list[float] = []
    last_reply = ""
    every = max(1, turns // 10)
    cap_at = None if minutes is None else time.perf_counter() + minutes * 60
    for n in range(1, turns + 1):
        if cap_at is not None and time.perf_counter() > cap_at:
            return latencies, f"run cap: {minutes:g} minutes passed before turn {n}", last_reply
        started = time.perf_counter()
        try:
            last_reply = await asyncio.wait_for(
                send(n, turn_id(n), prompt(n)), TURN_TIMEOUT_SECONDS
            )
        except TimeoutError:
            return latencies, f"turn {n} had no result within {TURN_TIMEOUT_SECONDS:.0f}s", ""
        except Exception as err:  # the failure is the finding: report it and stop
            return latencies, f"turn {n} failed: {type(err).__name__}: {err}", last_reply
        latencies.append(time.perf_counter() - started)
        if n % every == 0:
            print(f"  {label}: turn {n}/{turns}, {latencies[-1] * 1000:.0f} ms", flush=True)
    return latencies, None, last_reply


async def history_report(
    client: Client, workflow_id: str, turns_done: int, checkpoints: Sequence[int]
) -> dict[str, Any]:
    """History bytes per turn and in total, and what the server said if it stopped the run."""
    history = await session_history(client, workflow_id)
    per_turn = [history.bytes_by_update.get(turn_id(n)) for n in range(1, turns_done + 1)]
    cumulative: list[int] = []
    total = 0
    for size in per_turn:
        total += size or 0
        cumulative.append(total)
    largest_payload, largest_at, failures, terminated = await _events(
        client, workflow_id, [r.run_id for r in history.runs]
    )
    description = await client.get_workflow_handle(workflow_id).describe()
    return {
        "workflow_id": workflow_id,
        "runs": len(history.runs),
        "status": description.status.name if description.status else None,
        "history_bytes_total": sum(r.history_size_bytes for r in history.runs),
        "history_events_total": sum(r.history_length for r in history.runs),
        "history_bytes_per_turn_at": {
            str(n): per_turn[n - 1] for n in checkpoints if n <= len(per_turn)
        },
        "history_bytes_cumulative_at": {
            str(n): cumulative[n - 1] for n in checkpoints if n <= len(cumulative)
        },
        # The last turn that completed: where a session that stopped early stood.
        "history_bytes_last_turn": per_turn[-1] if per_turn else None,
        "largest_activity_input_bytes": largest_payload,
        "largest_activity_input_in_run": largest_at,
        "workflow_task_failures": failures,
        "terminated_reason": terminated,
        "series": {"history_bytes_per_turn": per_turn, "history_bytes_cumulative": cumulative},
    }


def latency_report(latencies: Sequence[float]) -> dict[str, Any]:
    ms = sorted(x * 1000 for x in latencies)
    if not ms:
        return {"turns": 0}
    return {
        "turns": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p90_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.9))], 1),
        "max_ms": round(ms[-1], 1),
        "first_10_p50_ms": round(statistics.median(x * 1000 for x in latencies[:10]), 1),
        "last_10_p50_ms": round(statistics.median(x * 1000 for x in latencies[-10:]), 1),
    }


def compare(sides: dict[str, Any]) -> dict[str, Any]:
    """Both sides over the turns both completed: latency p50 and history per turn."""
    official, statecore = sides["official"], sides["statecore"]
    if "skipped" in official:
        return {}
    both = min(official["turns_done"], statecore["turns_done"])

    def p50(side: dict[str, Any]) -> float | None:
        seconds = [ms / 1000 for ms in side["latency_ms_series"][:both]]
        return latency_report(seconds).get("p50_ms")

    a_bytes = official["series"]["history_bytes_per_turn"]
    b_bytes = statecore["series"]["history_bytes_per_turn"]
    return {
        "turns_both_completed": both,
        "p50_ms_over_those_turns": {"official": p50(official), "statecore": p50(statecore)},
        "official_to_statecore_history_bytes_per_turn_at": {
            str(n): round(a_bytes[n - 1] / b_bytes[n - 1], 1)
            for n in sorted({*CHECKPOINTS, both})
            if n <= both and a_bytes[n - 1] and b_bytes[n - 1]
        },
    }


def print_summary(result: dict[str, Any]) -> None:
    """Each side's turns, latency and history in a few lines, and the comparison."""
    for name, side in result["sides"].items():
        if "skipped" in side:
            print(f"{name}: skipped ({side['skipped']})")
            continue
        print(
            f"{name}: {side['turns_done']}/{side['turns_asked']} turns, status {side['status']}, "
            f"p50 {side['latency'].get('p50_ms')} ms, history total "
            f"{side['history_bytes_total']:,} B, per turn at "
            f"{side['history_bytes_per_turn_at']}, largest activity input "
            f"{side['largest_activity_input_bytes']:,} B"
        )
        if side["stopped_by"]:
            print(f"  stopped by: {side['stopped_by']}")
        if side["terminated_reason"]:
            print(f"  terminated: {side['terminated_reason']}")
    if result["comparison"]:
        print(f"comparison: {result['comparison']}")


async def _events(
    client: Client, workflow_id: str, run_ids: Sequence[str]
) -> tuple[int, int | None, list[str], str | None]:
    """Largest activity input, the run it was in, workflow-task failures, termination reason:
    read from every run of the workflow."""
    largest, largest_run = 0, None
    failures: list[str] = []
    terminated: str | None = None
    for index, run_id in enumerate(run_ids):
        events = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        for event in events.events:
            if event.event_type == _SCHEDULED:
                size = event.activity_task_scheduled_event_attributes.input.ByteSize()
                if size > largest:
                    largest, largest_run = size, index
            elif event.event_type == _TASK_FAILED:
                failed = event.workflow_task_failed_event_attributes
                cause = WorkflowTaskFailedCause.Name(failed.cause)
                failures.append(f"{cause}: {failed.failure.message[:300]}")
            elif event.event_type == _TERMINATED:
                terminated = event.workflow_execution_terminated_event_attributes.reason
    return largest, largest_run, failures[:20], terminated


def run_side_a(
    cmd: Sequence[str], env: Mapping[str, str], out: Path, timeout: float
) -> dict[str, Any]:
    """Run the official side (a) in its own environment and read the JSON it wrote to
    ``out``; RuntimeError if it failed, subprocess.TimeoutExpired after ``timeout`` s."""
    done = subprocess.run(list(cmd), env=dict(env), timeout=timeout, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"side (a) exited with {done.returncode}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def write_result(result: dict[str, Any], out: Path, plot: Callable[[Path], None]) -> None:
    """Write ``result`` to ``out`` and its figure (``plot(png)``) beside it, and print the
    summary."""
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_suffix(".png")
    plot(png)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print_summary(result)
    print(f"\nwrote {out} and {png}")


def side_report(
    label: str,
    packages: Sequence[str],
    turns_asked: int,
    latencies: Sequence[float],
    stopped_by: str | None,
    last_reply: str,
    history: dict[str, Any],
) -> dict[str, Any]:
    """One side's result as the comparison and the plot read it."""
    from importlib import metadata

    return {
        "label": label,
        "versions": {name: metadata.version(name) for name in packages},
        "turns_asked": turns_asked,
        "turns_done": len(latencies),
        "stopped_by": stopped_by,
        "last_reply": last_reply,
        "latency": latency_report(latencies),
        "latency_ms_series": [round(x * 1000, 2) for x in latencies],
        **history,
    }
