"""bench/context_cpu.py, in a short run: both versions build every window it names (each run
checks that the whole window fits), and the result holds a paired figure per size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import context_cpu


@pytest.mark.parametrize("tools", [False, True])
def test_a_short_run_times_both_versions_at_every_size(tmp_path: Path, tools: bool) -> None:
    out = tmp_path / "context_cpu.json"
    args = ["--before", "HEAD", "--rounds", "2", "--calls", "3", "--sizes", "10,60"]
    context_cpu.main([*args, *(["--tools"] if tools else []), "--out", str(out)])
    result = json.loads(out.read_text())
    expected = "tool call and result every 10 messages" if tools else "plain messages"
    assert result["window"] == expected
    assert set(result["by_window_messages"]) == {"10", "60"}
    for row in result["by_window_messages"].values():
        assert len(row["before"]["values"]) == len(row["after"]["values"]) == 2
        assert all(v > 0 for v in row["before"]["values"] + row["after"]["values"])
