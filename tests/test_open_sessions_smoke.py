"""The open-sessions benchmark's quick run (bench/open_sessions.py): a worker process with
its default workflow cache, sessions opened, swept, hot and drawn at random, probes of two
run lengths. No timing thresholds: the numbers are the benchmark's report (bench/README.md,
"Open sessions: the uncached turn"), not something a busy machine should fail a test on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def test_open_sessions_quick(tmp_path: Path) -> None:
    out = tmp_path / "open.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.open_sessions", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["smoke"] is True
    settings = result["settings"]
    assert (settings["sessions"], settings["cache"], settings["idle_continue"]) == (30, 1000, 60)
    phases = {p["phase"]: p for p in result["phases"]}
    assert list(phases) == ["open", "sweep", "hot", "uniform", "skewed"]
    planned = {"open": 30, "sweep": 30, "hot": 20, "uniform": 30, "skewed": 30}
    for name, turns in planned.items():
        phase = phases[name]
        assert phase["all"]["turns"] == turns, name
        split = phase["predicted_cached"]["turns"] + phase["predicted_uncached"]["turns"]
        assert split == turns, name
        assert 0 < phase["all"]["p50_ms"] <= phase["all"]["p99_ms"], name
        assert phase["worker_cpu_ms_per_turn"] > 0 and phase["server_cpu_ms_per_turn"] > 0
        # The worker's own cache counters were read (30 sessions all fit its cache).
        assert phase["cache_counters"].get("sticky_cache_hit", 0) > 0, name
    # Every session's first turn is a first touch; a second sweep over 30 sessions is cached.
    assert phases["open"]["predicted_uncached"]["turns"] == 30
    assert phases["sweep"]["predicted_cached"]["turns"] == 30
    assert [(p["turns_built"], p["after"]) for p in result["probes"]] == [
        (3, "sweep"),
        (10, "sweep"),
        (3, "skewed"),
        (10, "skewed"),
    ]
    memory = result["memory_timeline"]["rows"]
    assert len(memory) >= 2 and all(row[3] > 0 for row in memory)
    assert memory[-1][1] == 32  # 30 sessions and 2 probes opened
    assert out.with_suffix(".png").stat().st_size > 0
