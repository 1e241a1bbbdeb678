"""The long session: one session, many sequential turns; is the cost of a turn flat?

Compares the first turns with the last ones, on latency (as the caller sees it) and on the
workflow history each turn adds (see ``bench.harness.history`` for how that is counted), and counts
the runs (continue-as-new) the session went through.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from temporalio.client import Client

from bench.harness.history import session_history
from bench.harness.measure import Scenario, percentile, summarize, timed
from bench.harness.process_cpu import CpuMeter

#: Turns compared at each end of the session.
WINDOW = 100
#: The last turns may cost at most this much more (latency p50, history bytes per turn).
TARGET_CHANGE_PCT = 15.0


def _window(
    latency: list[float], per_turn_bytes: list[int | None], cpu: list[tuple[float, float]]
) -> dict[str, Any]:
    known = [b for b in per_turn_bytes if b is not None]
    return {
        "bench_process_cpu_ms_per_turn": round(sum(c for c, _ in cpu) * 1000 / len(cpu), 2),
        "server_cpu_ms_per_turn": round(sum(s for _, s in cpu) * 1000 / len(cpu), 2),
        "p50_ms": round(percentile([x * 1000 for x in latency], 50), 2),
        "p99_ms": round(percentile([x * 1000 for x in latency], 99), 2),
        "history_bytes_p50": round(statistics.median(known), 1) if known else None,
        "history_bytes_mean": round(statistics.fmean(known), 1) if known else None,
    }


def _change(first: float | None, last: float | None) -> float | None:
    if not first or last is None:
        return None
    return round((last - first) / first * 100, 1)


async def run_long_session(
    client: Client,
    scenario: Scenario,
    session: str,
    turns: int,
    *,
    max_minutes: float,
    meter: CpuMeter,
    control: Scenario | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run up to ``turns`` turns (stopping after ``max_minutes``); returns the JSON block and
    the per-turn series for the plot.

    ``control`` (the floor) takes one turn after each turn of both windows: the first and last
    turns are many minutes apart, and on a shared machine the load may change in between; the
    agent-to-floor ratio of each window is not fooled by that."""
    planned_w = max(1, min(WINDOW, turns // 3))
    controls: dict[str, list[float]] = {"first": [], "last": []}
    control_seconds = 0.0
    turn_ids: list[str] = []
    latency: list[float] = []
    cpu: list[tuple[float, float]] = []  # (bench process, server) CPU seconds per turn
    start = time.perf_counter()
    deadline = start + max_minutes * 60
    report_every = max(1, turns // 10)
    for n in range(1, turns + 1):
        turn_id = f"long-{n:06d}"
        before = meter.read()
        latency.append(await timed(scenario.send, session, n, turn_id))
        used = meter.read_end() - before
        cpu.append((used.worker, used.server))
        turn_ids.append(turn_id)
        which = "first" if n <= planned_w else "last" if n > turns - planned_w else None
        if control is not None and which is not None:
            took = await timed(control.send, f"{session}-control", n)
            controls[which].append(took)
            control_seconds += took
        if n % report_every == 0:
            recent = latency[-report_every:]
            print(
                f"  long session: {n}/{turns} turns, last {len(recent)} p50 "
                f"{percentile(recent, 50) * 1000:.1f} ms",
                flush=True,
            )
        if time.perf_counter() > deadline:
            print(f"  long session: stopped at {n} turns after {max_minutes} min", flush=True)
            break
    wall = time.perf_counter() - start - control_seconds

    history = await session_history(client, scenario.workflow_id(session))
    per_turn = [history.bytes_by_update.get(t) for t in turn_ids]
    run_of = [history.run_by_update.get(t) for t in turn_ids]
    run_starts = [i + 1 for i, r in enumerate(run_of) if i == 0 or r != run_of[i - 1]]

    done = len(turn_ids)
    w = max(1, min(WINDOW, done // 3))
    first = _window(latency[:w], per_turn[:w], cpu[:w])
    last = _window(latency[-w:], per_turn[-w:], cpu[-w:])
    first["turns"] = f"1-{w}"
    last["turns"] = f"{done - w + 1}-{done}"
    for window, name in ((first, "first"), (last, "last")):
        floor = controls[name]
        window["floor_p50_ms"] = round(percentile(floor, 50) * 1000, 2) if floor else None
        window["p50_ratio_to_floor"] = (
            round(window["p50_ms"] / window["floor_p50_ms"], 3) if floor else None
        )
    runs = [r.as_json() for r in history.runs]
    total_size = sum(r["history_size_bytes"] for r in runs)
    block = {
        "store": "sqlite",
        "requested_turns": turns,
        "completed_turns": done,
        "wall_seconds": round(wall, 1),
        "latency": summarize(latency, wall),
        "first_turn_ms": round(latency[0] * 1000, 2),
        "window": w,
        "first_window": first,
        "last_window": last,
        "change_pct": {
            "p50_latency": _change(first["p50_ms"], last["p50_ms"]),
            "history_bytes_p50": _change(first["history_bytes_p50"], last["history_bytes_p50"]),
            "p50_ratio_to_floor": _change(first["p50_ratio_to_floor"], last["p50_ratio_to_floor"]),
            "bench_process_cpu": _change(
                first["bench_process_cpu_ms_per_turn"], last["bench_process_cpu_ms_per_turn"]
            ),
        },
        "target_change_pct": TARGET_CHANGE_PCT,
        "runs": len(runs),
        "history_size_bytes_total": total_size,
        "history_bytes_per_turn_overall": round(total_size / done, 1),
        "turns_without_history_event": sum(1 for b in per_turn if b is None),
        "per_run": runs,
        "series_every": max(1, done // 200),
        "series": _series(latency, per_turn, max(1, done // 200)),
    }
    series = {
        "long_latency_ms": [x * 1000 for x in latency],
        "long_bytes": per_turn,
        "run_starts": run_starts,
    }
    return block, series


def _series(
    latency: list[float], per_turn: list[int | None], every: int
) -> list[dict[str, float | int | None]]:
    """Medians over consecutive blocks of ``every`` turns: enough to redraw the curve."""
    out: list[dict[str, float | int | None]] = []
    for i in range(0, len(latency), every):
        lat = latency[i : i + every]
        known = [b for b in per_turn[i : i + every] if b is not None]
        out.append(
            {
                "first_turn": i + 1,
                "p50_ms": round(percentile([x * 1000 for x in lat], 50), 2),
                "history_bytes_p50": statistics.median(known) if known else None,
            }
        )
    return out
