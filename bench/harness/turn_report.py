"""The turn benchmark's figures from its rounds: per scenario the mean latency with its 95%
interval, the percentiles and the CPU per turn by process; per compared pair the ratio to its
floor, round by round, for mean latency and for CPU per turn.

A ratio is taken within each round (the scenario's round against the floor's round of the same
round, run back to back) and the rounds' ratios are summarised by their geometric mean with a
95% Student's t interval on their logarithms (``bench/harness/round_stats.py``).
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.harness.measure import Samples, percentile
from bench.harness.round_stats import mean_interval, ratio_interval

FLOOR = "floor_activity"
#: The floor plus the one search-attribute upsert the operator contract puts in every turn.
CONTRACT_FLOOR = "floor_activity_upsert"
#: The reference of the state-only turns: an Update running one no-op local activity.
LOCAL_FLOOR = "floor_local_activity"

#: (scenario, its floor): the ratios the benchmark reports.
RATIO_PAIRS: tuple[tuple[str, str], ...] = (
    ("floor_activity_upsert", FLOOR),
    ("floor_local_activity", FLOOR),
    ("state_sqlite", LOCAL_FLOOR),
    ("state_reads_sqlite", LOCAL_FLOOR),
    ("agent_sqlite", FLOOR),
    ("agent_postgresql", FLOOR),
    ("agent_sqlite", CONTRACT_FLOOR),
    ("agent_postgresql", CONTRACT_FLOOR),
)

#: Issue 14's targets: (phase, scenario, floor, the highest ratio of mean latency allowed).
TARGETS: tuple[tuple[str, str, str, float], ...] = (
    ("single_session", "state_sqlite", LOCAL_FLOOR, 1.15),
    ("single_session", "agent_sqlite", FLOOR, 1.15),
    ("single_session", "agent_postgresql", FLOOR, 1.15),
    ("concurrent", "agent_sqlite", FLOOR, 1.25),
    ("concurrent", "agent_postgresql", FLOOR, 1.25),
)


def ratio_key(scenario: str, floor: str) -> str:
    return f"{scenario}/{floor}"


def _round(x: float, digits: int = 2) -> float:
    return round(x, digits)


def _interval(mean: float, low: float, high: float, digits: int = 2) -> dict[str, Any]:
    return {"value": _round(mean, digits), "ci95": [_round(low, digits), _round(high, digits)]}


def _round_means_ms(rounds: list[Samples]) -> list[float]:
    return [statistics.fmean(r.latencies) * 1000 for r in rounds]


def _round_cpu_ms(rounds: list[Samples]) -> list[float]:
    return [r.cpu.total * 1000 / len(r.latencies) for r in rounds]


def scenario_stats(rounds: list[Samples]) -> dict[str, Any]:
    """One scenario's figures from its rounds (each round's ``Samples``)."""
    ms = [x * 1000 for r in rounds for x in r.latencies]
    turns = len(ms)
    wall = sum(r.wall_seconds for r in rounds)
    worker = sum(r.cpu.worker for r in rounds)
    server = sum(r.cpu.server for r in rounds)
    postgresql = sum(r.cpu.postgresql for r in rounds)
    round_means = _round_means_ms(rounds)
    round_cpu = _round_cpu_ms(rounds)
    return {
        "turns": turns,
        "rounds": len(rounds),
        "mean_ms": _interval(*mean_interval(round_means)),
        "p50_ms": _round(percentile(ms, 50)),
        "p90_ms": _round(percentile(ms, 90)),
        "p99_ms": _round(percentile(ms, 99)),
        "min_ms": _round(min(ms)),
        "max_ms": _round(max(ms)),
        "turns_per_second": _round(turns / wall) if wall else 0.0,
        "cpu_ms_per_turn": {
            "total": _interval(*mean_interval(round_cpu)),
            "worker": _round(worker * 1000 / turns),
            "temporal_server": _round(server * 1000 / turns),
            "postgresql": _round(postgresql * 1000 / turns),
        },
        "round_mean_ms": [_round(x) for x in round_means],
        "round_cpu_ms_per_turn": [_round(x) for x in round_cpu],
    }


def ratio_stats(rounds: list[Samples], floor: list[Samples]) -> dict[str, Any]:
    """A scenario against its floor, round by round."""
    latency = [a / b for a, b in zip(_round_means_ms(rounds), _round_means_ms(floor), strict=True)]
    cpu = [a / b for a, b in zip(_round_cpu_ms(rounds), _round_cpu_ms(floor), strict=True)]
    pooled = [x for r in rounds for x in r.latencies]
    pooled_floor = [x for r in floor for x in r.latencies]
    return {
        "latency_mean": _interval(*ratio_interval(latency), digits=3),
        "cpu_per_turn": _interval(*ratio_interval(cpu), digits=3),
        # Of all turns pooled, for comparison with earlier runs (no interval).
        "p50": _round(percentile(pooled, 50) / percentile(pooled_floor, 50), 3),
    }


def phase_report(
    rounds: dict[str, list[Samples]], skipped: dict[str, str], sessions: int
) -> dict[str, Any]:
    """One phase (1 session, or N concurrent sessions) from each scenario's rounds."""
    stats: dict[str, Any] = {name: scenario_stats(r) for name, r in rounds.items()}
    stats.update({name: {"skipped": reason} for name, reason in skipped.items()})
    ratios = {
        ratio_key(name, floor): {"scenario": name, "floor": floor}
        | ratio_stats(rounds[name], rounds[floor])
        for name, floor in RATIO_PAIRS
        if name in rounds and floor in rounds
    }
    return {"sessions": sessions, "scenarios": stats, "ratios": ratios}


def target_report(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 14's targets against this run: met when the geometric mean is at or under the
    target; ``met_with_95pct_confidence`` when the whole interval is."""
    out: list[dict[str, Any]] = []
    for phase, name, floor, target in TARGETS:
        ratio = result[phase]["ratios"].get(ratio_key(name, floor))
        row: dict[str, Any] = {
            "phase": phase,
            "scenario": name,
            "floor": floor,
            "target": target,
        }
        if ratio is None:
            row["status"] = "not measured"
        else:
            latency = ratio["latency_mean"]
            row["latency_mean_ratio"] = latency
            row["status"] = "met" if latency["value"] <= target else "not met"
            row["met_with_95pct_confidence"] = latency["ci95"][1] <= target
        out.append(row)
    return out
