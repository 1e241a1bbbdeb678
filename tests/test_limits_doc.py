"""docs/limits.md shows the limits the code enforces (the table is built from the constants)."""

from __future__ import annotations

from tests.limits_table import DOC, current_table, render_table


def test_the_limits_table_matches_the_code() -> None:
    assert current_table(DOC.read_text(encoding="utf-8")) == render_table(), (
        "docs/limits.md is out of date: run python -m tests.limits_table"
    )
