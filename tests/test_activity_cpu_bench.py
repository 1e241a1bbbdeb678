"""The chat-activity CPU benchmark (``python -m bench.activity_cpu``) on PostgreSQL, in a short
run: both versions are measured in every round, and the server-side figures (backends' CPU,
WAL, the headers' table) come back from the database the run used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.postgres


def test_a_short_activity_run_reports_the_servers_side_on_postgresql(tmp_path: Path) -> None:
    out = tmp_path / "activity_cpu.json"
    args = ["--before", "HEAD", "--db", "postgresql", "--rounds", "2", "--turns", "10"]
    extra = ["--warmup", "3", "--log-messages", "40", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "bench.activity_cpu", *args, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["log_messages_before_first_turn"] == 40
    for figure in ("wall_ms_per_turn", "wal_bytes_per_turn", "sessions_table_bytes"):
        for version in ("before", "after"):
            assert min(result[figure][version]["values"]) > 0, (figure, version)
    for version in ("before", "after"):
        assert min(result["postgresql_cpu_ms_per_turn"][version]["values"]) >= 0
    # The same code both ways: the same statements, and the same WAL within a page or two.
    # The WAL figure is the whole server's: a checkpoint during a run adds full-page images
    # of the pages the turns touch next (kilobytes per turn over ten turns), so each
    # version's quietest round is compared; two checkpoints a minute apart do not happen.
    assert result["statements_per_turn"]["before"] == result["statements_per_turn"]["after"]
    wal = result["wal_bytes_per_turn"]
    quietest = {version: min(wal[version]["values"]) for version in ("before", "after")}
    assert abs(quietest["after"] - quietest["before"]) < 2 * 8192 / 10, wal
