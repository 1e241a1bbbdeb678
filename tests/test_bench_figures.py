"""The benchmark figures redraw from the committed results (``python -m bench.harness.plot``),
run as a process: tests never import bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def test_the_committed_figures_redraw_from_their_json(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.harness.plot", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("turns.png", "chaos-quick-timeline.png", "load-short-timeline.png"):
        assert (tmp_path / name).stat().st_size > 20_000, name
    # Both scenario groups are drawn, each on its own axis (the point of the split).
    turns = json.loads((RESULTS / "turns.json").read_text())
    assert {"single_session", "concurrent"} <= set(turns)
