"""The load benchmark's quick run: one worker process, concurrent sessions, nothing lost.

No timing thresholds: speed is the benchmark's report (bench/README.md), not a test that a
busy machine would make flaky. The full run is ``python -m bench.load``
(results in bench/results/load.json).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dbs import server_down_reason

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.slow]


async def test_load_quick(tmp_path: Path) -> None:
    reason = await server_down_reason("postgresql")
    if reason:
        pytest.skip(reason)
    out = tmp_path / "load.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.load", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["mode"] == "quick" and result["ok"] is True
    assert result["settings"] == {"sessions": 20, "turns_per_session": 3}

    # Every turn answered, no client error, no failure counted inside the worker.
    assert result["turns_planned"] == result["turns_answered"] == 60
    assert result["client_errors"] == 0 and result["client_error_samples"] == []
    assert result["problems"] == []
    # The timeline the figure is drawn from: a time per answered turn, memory samples in order.
    timeline = result["timeline"]
    assert len(timeline["turn_completed_seconds"]) == 60
    samples = timeline["worker_rss_mib"]
    assert len(samples) >= 2 and [t for t, _ in samples] == sorted(t for t, _ in samples)
    assert all(mib > 0 for _, mib in samples)
    assert (tmp_path / "load-timeline.png").stat().st_size > 10_000
    metrics = result["worker_metrics"]
    assert metrics["statecore_turns"] == 60
    assert {name: f["total"] for name, f in metrics["failures"].items()} == dict.fromkeys(
        metrics["failures"], 0
    )

    # Read back from SQL: 20 sessions, 120 messages, each turn exactly once and in order.
    sql = result["sql"]
    assert (sql["sessions_found"], sql["messages_found"]) == (20, 120)
    assert sql["sessions_expected"] == 20 and sql["messages_expected"] == 120
    for zero in (
        "missing_turns",
        "duplicated_turns",
        "unexpected_turns",
        "sessions_with_gaps",
        "sessions_out_of_order",
        "counter_mismatches",
    ):
        assert sql[zero] == 0, (zero, sql["problems"])

    # The figures the report is for are present and consistent.
    latency = result["latency_all_turns"]
    assert latency["turns"] == 60
    assert 0 < latency["min_ms"] <= latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]
    assert latency["p99_ms"] <= latency["max_ms"]
    assert result["latency_first_turn"]["turns"] == 20
    assert result["latency_later_turns"]["turns"] == 40
    assert result["turns_per_second"] > 0
    memory = result["worker_memory"]
    assert memory["peak_rss_mib"] == max(memory["vmhwm_mib"], memory["max_sampled_rss_mib"])
    assert memory["max_sampled_rss_mib"] >= memory["idle_rss_mib_before_load"] > 0
    assert memory["rss_samples"] > 0
    assert result["cpu"]["worker"]["cpu_seconds"] > 0
    # The worker's SQL pool was seen from PostgreSQL while the turns ran.
    assert result["worker_database_connections"]["max_open"] >= 1
    # Every session's history was read for retried work (a number, whatever the machine did).
    assert set(result["history_retries"]["events"]) == {
        "workflow_task_timed_out",
        "workflow_task_failed",
        "activity_task_timed_out",
        "activity_task_failed",
    }
    timeouts = result["history_retries"]["workflow_task_timeouts_by_type"]
    assert sum(timeouts.values()) == result["history_retries"]["events"]["workflow_task_timed_out"]
