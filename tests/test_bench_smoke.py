"""The turn benchmark runs end to end in quick mode and writes a result that makes sense.

No timing thresholds here: speed targets live in the benchmark's own report (bench/README.md),
not in tests that a busy machine would make flaky.
"""

from __future__ import annotations

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

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def _latency_ok(stats: dict, turns: int) -> None:
    assert stats["turns"] == turns
    assert 0 < stats["min_ms"] <= stats["p50_ms"] <= stats["p99_ms"] <= stats["max_ms"]
    assert stats["turns_per_second"] > 0
    assert stats["bench_process_cpu_ms_per_turn"] > 0
    assert stats["server_cpu_ms_per_turn"] >= 0


def test_turn_bench_quick(tmp_path: Path) -> None:
    result, stdout = run_quick_bench("turns", tmp_path)
    assert "history.transferProcessorMaxPollRPS = 20" in stdout

    assert result["mode"] == "quick"
    machine = result["machine"]
    assert machine["cpu_count"] >= 1 and machine["temporalio"] and machine["python"]
    assert machine["date"].startswith("20")
    assert result["server"]["server_version"]
    assert result["server"]["dynamic_config_overrides"] == {}

    settings = result["settings"]
    for phase, turns in (
        ("single_session", settings["rounds"] * settings["turns_per_round"]),
        (
            "concurrent",
            settings["rounds"] * settings["session_turns_per_round"] * settings["sessions"],
        ),
    ):
        block = result[phase]
        assert set(block["scenarios"]) == set(SCENARIOS)
        for name in SCENARIOS:
            stats = block["scenarios"][name]
            if "skipped" in stats:  # only PostgreSQL may be missing, and it says why
                assert name == "agent_postgresql" and "unreachable" in stats["skipped"]
                continue
            _latency_ok(stats, turns)
            for reference, ratios in (
                ("floor_activity", block["p50_ratio_to_floor"]),
                ("floor_activity_upsert", block["p50_ratio_to_contract_floor"]),
                ("floor_local_activity", block["p50_ratio_to_local_floor"]),
            ):
                if name != reference:
                    expected = stats["p50_ms"] / block["scenarios"][reference]["p50_ms"]
                    assert ratios[name] == pytest.approx(expected, rel=0.01)
    assert result["concurrent"]["sessions"] == settings["sessions"] == 5

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
