"""The change-feed benchmark runs end to end in quick mode and writes a result that makes
sense. No timing thresholds here: the target and the measured numbers are in
bench/README.md; what is asserted holds on any machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow]


def test_events_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "events.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.events", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["benchmark"] == "events" and result["mode"] == "quick"
    assert result["target_share_of_turn_worker_cpu"] == 0.05
    assert set(result["dialects"]) == {"sqlite", "postgresql"}
    for dialect, block in result["dialects"].items():
        if "skipped" in block:  # only PostgreSQL may be missing, and it says why
            assert dialect == "postgresql" and block["skipped"]
            continue
        cpu = block["cpu"]
        assert cpu["turns_per_arm"] == 40
        assert cpu["commit_cpu_ms_per_turn_feed_on"] > 0 < cpu["commit_cpu_ms_per_turn_feed_off"]
        assert cpu["feed_cpu_ms_per_turn"] == pytest.approx(
            cpu["commit_cpu_ms_per_turn_feed_on"] - cpu["commit_cpu_ms_per_turn_feed_off"],
            abs=0.002,
        )
        delivery = block["delivery"]
        assert delivery["turns"] == 10 and delivery["pushed"] == (dialect == "postgresql")
        # Every turn reached the follower within the follower's bound. The follower may see a
        # commit a moment before the writer's own clock reading after it, hence the margin.
        assert -100 < delivery["min_ms"] <= delivery["p50_ms"] <= delivery["max_ms"] < 30_000
