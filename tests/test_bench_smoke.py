"""The turn benchmark runs end to end in quick mode and writes a result that makes sense.

No timing thresholds here: speed targets live in the benchmark's own report (bench/README.md),
not in tests that a busy machine would make flaky.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.quick_bench import run_quick_bench

SCENARIOS = (
    "floor_activity",
    "floor_activity_upsert",
    "floor_local_activity",
    "state_sqlite",
    "state_reads_sqlite",
    "agent_sqlite",
    "agent_postgresql",
)

FLOOR, CONTRACT_FLOOR, LOCAL_FLOOR = (
    "floor_activity",
    "floor_activity_upsert",
    "floor_local_activity",
)
#: The ratios every run reports: (scenario, the floor it is divided by).
RATIO_PAIRS = (
    (CONTRACT_FLOOR, FLOOR),
    (LOCAL_FLOOR, FLOOR),
    ("state_sqlite", LOCAL_FLOOR),
    ("state_reads_sqlite", LOCAL_FLOOR),
    ("agent_sqlite", FLOOR),
    ("agent_postgresql", FLOOR),
    ("agent_sqlite", CONTRACT_FLOOR),
    ("agent_postgresql", CONTRACT_FLOOR),
)
#: Issue 14's targets: (phase, scenario, floor, the highest ratio of mean latency allowed).
TARGETS = (
    ("single_session", "state_sqlite", LOCAL_FLOOR, 1.15),
    ("single_session", "agent_sqlite", FLOOR, 1.15),
    ("single_session", "agent_postgresql", FLOOR, 1.15),
    ("concurrent", "agent_sqlite", FLOOR, 1.25),
    ("concurrent", "agent_postgresql", FLOOR, 1.25),
)

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def _interval_ok(block: dict) -> None:
    low, high = block["ci95"]
    assert low <= block["value"] <= high


def _scenario_ok(stats: dict, turns: int, rounds: int, postgresql: bool) -> None:
    assert stats["turns"] == turns and stats["rounds"] == rounds
    assert 0 < stats["min_ms"] <= stats["p50_ms"] <= stats["p90_ms"] <= stats["p99_ms"]
    assert stats["p99_ms"] <= stats["max_ms"]
    assert stats["min_ms"] <= stats["mean_ms"]["value"] <= stats["max_ms"]
    _interval_ok(stats["mean_ms"])
    # The mean is the rounds' mean (every round has the same number of turns).
    assert len(stats["round_mean_ms"]) == len(stats["round_cpu_ms_per_turn"]) == rounds
    assert stats["mean_ms"]["value"] == pytest.approx(
        sum(stats["round_mean_ms"]) / rounds, abs=0.02
    )
    assert stats["turns_per_second"] > 0
    cpu = stats["cpu_ms_per_turn"]
    _interval_ok(cpu["total"])
    assert cpu["worker"] > 0 and cpu["temporal_server"] >= 0
    # Only the PostgreSQL scenario's turns reach PostgreSQL's backends.
    if postgresql:
        assert cpu["postgresql"] > 0
    assert cpu["total"]["value"] == pytest.approx(
        cpu["worker"] + cpu["temporal_server"] + cpu["postgresql"], abs=0.05
    )


def _ratio_ok(block: dict, scenario: str, floor: str, rounds: int) -> None:
    ratio = block["ratios"][f"{scenario}/{floor}"]
    assert (ratio["scenario"], ratio["floor"]) == (scenario, floor)
    for measure, per_round in (
        ("latency_mean", "round_mean_ms"),
        ("cpu_per_turn", "round_cpu_ms_per_turn"),
    ):
        _interval_ok(ratio[measure])
        # The geometric mean of the rounds' ratios, recomputed from the rounds' figures.
        mine = block["scenarios"][scenario][per_round]
        theirs = block["scenarios"][floor][per_round]
        logs = [math.log(a / b) for a, b in zip(mine, theirs, strict=True)]
        assert len(logs) == rounds
        assert ratio[measure]["value"] == pytest.approx(math.exp(sum(logs) / rounds), rel=0.02)


def test_turn_bench_quick(tmp_path: Path) -> None:
    result, stdout = run_quick_bench("turns", tmp_path)
    assert "history.transferProcessorMaxPollRPS = 20" in stdout
    assert "SMOKE TEST" in stdout

    assert result["mode"] == "quick" and result["smoke"] is True
    machine = result["machine"]
    assert machine["cpu_count"] >= 1 and machine["temporalio"] and machine["python"]
    assert machine["date"].startswith("20")
    assert result["server"]["server_version"]
    assert result["server"]["dynamic_config_overrides"] == {}
    assert "Student's t" in result["method"]["latency_interval"]

    settings = result["settings"]
    for phase, rounds, turns in (
        ("single_session", settings["rounds"], settings["turns_per_round"]),
        (
            "concurrent",
            settings["concurrent_rounds"],
            settings["session_turns_per_round"] * settings["sessions"],
        ),
    ):
        block = result[phase]
        assert set(block["scenarios"]) == set(SCENARIOS)
        postgres_ran = "skipped" not in block["scenarios"]["agent_postgresql"]
        for name in SCENARIOS:
            stats = block["scenarios"][name]
            if "skipped" in stats:  # only PostgreSQL may be missing, and it says why
                assert name == "agent_postgresql" and "unreachable" in stats["skipped"]
                continue
            _scenario_ok(stats, rounds * turns, rounds, postgresql=name == "agent_postgresql")
        for scenario, floor in RATIO_PAIRS:
            if scenario == "agent_postgresql" and not postgres_ran:
                assert f"{scenario}/{floor}" not in block["ratios"]
                continue
            _ratio_ok(block, scenario, floor, rounds)
    assert result["concurrent"]["sessions"] == settings["sessions"] == 5
    load = machine["loadavg_1min_at_round_ends"]
    assert load["rounds"] == settings["rounds"] + settings["concurrent_rounds"]
    assert 0 <= load["min"] <= load["mean"] <= load["max"]

    targets = {(t["phase"], t["scenario"], t["floor"]): t for t in result["targets"]}
    assert len(targets) == len(TARGETS)
    for phase, scenario, floor, limit in TARGETS:
        target = targets[(phase, scenario, floor)]
        assert target["target"] == limit
        if target["status"] == "not measured":
            continue
        ratio = result[phase]["ratios"][f"{scenario}/{floor}"]["latency_mean"]
        assert target["latency_mean_ratio"] == ratio
        assert target["status"] == ("met" if ratio["value"] <= limit else "not met")

    long = result["long_session"]
    assert long["completed_turns"] == long["requested_turns"] == settings["long_turns"]
    assert long["final_checkpoint"]["turn"] == long["completed_turns"]
    # Quick mode moves to a new run every 25 turns: 60 turns need three runs.
    assert long["runs"] == long["final_checkpoint"]["runs"] == 3
    assert sum(r["turns"] for r in long["per_run"]) == long["completed_turns"]
    assert long["turns_without_history_event"] == 0
    for run in long["per_run"]:
        # The server's own count and the sum of the fetched events agree closely.
        assert run["history_size_bytes"] == pytest.approx(run["event_bytes"], rel=0.05)
    for window in ("first_window", "last_window"):
        assert 0 < long[window]["p50_ms"] <= long[window]["p99_ms"]
        # A turn adds a few KiB of history whatever the conversation's length.
        assert 1_000 < long[window]["history_bytes_p50"] < 20_000
        # The floor ran alongside each window as a control for the machine's load.
        assert long[window]["floor_p50_ms"] > 0
        assert long[window]["p50_ratio_to_floor"] == pytest.approx(
            long[window]["p50_ms"] / long[window]["floor_p50_ms"], rel=0.01
        )
    assert long["change_pct"]["history_bytes_p50"] is not None
