"""bench/pg_share.py and bench/activity_cpu.py on PostgreSQL, in short runs: every variant
and version is measured in every round, and the server-side figures (backends' CPU, WAL,
the headers' table) come back from the database the run used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import activity_cpu, pg_share

pytestmark = pytest.mark.postgres


def test_a_short_share_run_measures_every_variant_each_round(tmp_path: Path) -> None:
    out = tmp_path / "pg_share.json"
    args = ["--rounds", "2", "--turns", "8", "--warmup", "3", "--session-turns", "5"]
    pg_share.main([*args, "--out", str(out)])
    result = json.loads(out.read_text())
    assert set(result["variants"]) == {"sqlite", "postgresql", "postgresql_async"}
    for name, variant in result["variants"].items():
        assert len(variant["wall"]["values"]) == 2 and min(variant["wall"]["values"]) > 0
        assert min(variant["worker_cpu"]["values"]) > 0
        pg_cpu = variant["postgresql_cpu"]["values"]
        assert (max(pg_cpu) == 0) if name == "sqlite" else (min(pg_cpu) >= 0)
    assert result["server_autovacuum"] in ("on", "off")
    assert len(result["flush_wait"]["values"]) == 2
    assert set(result["postgresql_minus_sqlite"]) == {"wall", "worker"}


def test_a_short_activity_run_reports_the_servers_side_on_postgresql(tmp_path: Path) -> None:
    out = tmp_path / "activity_cpu.json"
    args = ["--before", "HEAD", "--db", "postgresql", "--rounds", "2", "--turns", "10"]
    activity_cpu.main([*args, "--warmup", "3", "--log-messages", "40", "--out", str(out)])
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
