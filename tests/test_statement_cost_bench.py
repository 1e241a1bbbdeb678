"""bench/statement_cost.py, in a short run: each way really is the way it names (a direct
block gets the direct path's results, a SQLAlchemy block SQLAlchemy's), and the listener
that forces SQLAlchemy is removed again afterwards."""

from __future__ import annotations

import json
from pathlib import Path

from bench import statement_cost


def test_a_short_run_measures_both_ways_and_writes_its_result(tmp_path: Path) -> None:
    out = tmp_path / "statement_cost.json"
    statement_cost.main(
        ["--db", "sqlite", "--rounds", "2", "--statements", "20", "--out", str(out)]
    )
    result = json.loads(out.read_text())
    row = result["sqlite"]
    assert set(row) == {"direct", "sqlalchemy", "sqlalchemy_minus_direct"}
    assert len(row["direct"]["values"]) == len(row["sqlalchemy"]["values"]) == 2
    assert result["statements_per_block"] == 20
