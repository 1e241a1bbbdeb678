"""The short chaos run: worker kills, a Temporal restart and a PostgreSQL outage, nothing lost.

The long run is `python -m bench.chaos` (results in bench/results/chaos.json)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.chaos_processes import private_postgres_unavailable

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def test_quick_chaos_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    reason = private_postgres_unavailable()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "chaos.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.chaos", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    assert figures["worker_kills"] == 3
    assert figures["server_restarts"] == 1
    assert figures["db_outages"] == 1
    assert figures["turns_completed"] == figures["turns_planned"] == 40
    for zero in ("lost", "duplicated", "out_of_order", "stuck_sessions", "describe_mismatches"):
        assert figures[zero] == 0, (zero, figures)
