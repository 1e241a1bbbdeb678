"""The turn benchmark's intervals (bench/harness/round_stats.py), its run comparison
(``python -m bench.compare_runs``) and its settings compute what they say. Everything runs as
a process: tests never import bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def settings(*args: str) -> dict:
    done = bench("bench.turns", "--settings-only", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_intervals_quantiles_and_pauses_hold() -> None:
    # t quantiles against the published table, Student's t over a mean, a ratio's interval
    # symmetric in logarithms, pauses outside latency and wall time (bench.harness.checks).
    done = bench("bench.harness.checks", "stats")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok stats"


def _run(latency: float, cpu: float, smoke: bool = False) -> dict:
    ratio = {
        "latency_mean": {"value": latency, "ci95": [latency - 0.1, latency + 0.1]},
        "cpu_per_turn": {"value": cpu, "ci95": [cpu - 0.1, cpu + 0.1]},
    }
    phase = {"ratios": {"agent_sqlite/floor_activity": ratio}}
    return {"smoke": smoke, "single_session": phase, "concurrent": phase}


def test_compare_flags_a_ratio_more_than_the_tolerance_apart(tmp_path: Path) -> None:
    paths = {}
    for name, run in (
        ("a", _run(1.00, 2.00)),
        ("b", _run(1.04, 2.12)),
        ("c", _run(1.01, 1.98)),
        ("smoke", _run(1.0, 2.0, True)),
    ):
        paths[name] = str(tmp_path / f"{name}.json")
        Path(paths[name]).write_text(json.dumps(run))
    out = tmp_path / "compare.json"
    assert bench("bench.compare_runs", paths["a"], paths["b"], "--out", str(out)).returncode == 1
    rows = json.loads(out.read_text())["rows"]
    assert [(r["phase"], r["measure"], r["within_tolerance"]) for r in rows] == [
        ("single_session", "latency_mean", True),
        ("single_session", "cpu_per_turn", False),
        ("concurrent", "latency_mean", True),
        ("concurrent", "cpu_per_turn", False),
    ]
    assert rows[1]["difference_pct"] == 6.0

    assert bench("bench.compare_runs", paths["a"], paths["c"], "--out", str(out)).returncode == 0
    assert json.loads(out.read_text())["within_tolerance"] == 4
    tight = bench("bench.compare_runs", paths["a"], paths["c"], "--tolerance", "0.005")
    assert tight.returncode == 1
    # A smoke test's numbers never pass as a result, however close.
    smoke = bench("bench.compare_runs", paths["a"], paths["smoke"])
    assert smoke.returncode == 1 and "is a smoke test" in smoke.stdout


def test_a_smoke_run_cannot_take_a_result_name() -> None:
    refused = bench("bench.turns", "--quick", "--out", "bench/results/turns_run1.json")
    assert refused.returncode == 2 and "never a result" in refused.stderr
    quick = settings("--quick")
    assert quick["smoke"] and Path(quick["out"]).name == "turns-quick.json"
    assert not settings()["smoke"] and settings("--long")["long_turns"] == 10_000
    assert settings()["long_turns"] == 0  # the full run leaves the long session out


def test_server_config_values_are_parsed_and_a_malformed_one_is_refused() -> None:
    assert settings()["server_config"] == {}
    parsed = settings(
        "--server-config", "history.transferProcessorMaxPollRPS=1000", "--server-config", "a.b= 2"
    )
    assert parsed["server_config"] == {"history.transferProcessorMaxPollRPS": "1000", "a.b": "2"}
    for bad in ("no-equals-sign", "=1000", "key="):
        assert bench("bench.turns", "--server-config", bad).returncode == 2


def test_the_pause_before_a_turn_is_bounded() -> None:
    assert settings()["pause_ms"] == 50 and settings("--pause-ms", "0")["pause_ms"] == 0
    for bad in ("-1", "10001"):
        assert bench("bench.turns", "--pause-ms", bad).returncode == 2
