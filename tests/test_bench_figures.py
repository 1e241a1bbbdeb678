"""The benchmark figures redraw from the committed results (``python -m bench.plot``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.plot import SUMMARIZE_BAND, plot_chaos_timeline, plot_load_timeline, replot_turns

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def test_the_committed_figures_redraw_from_their_json(tmp_path: Path) -> None:
    turns = json.loads((RESULTS / "turns.json").read_text())
    shutil.copy(RESULTS / "turns-run.png", tmp_path / "turns-run.png")
    replot_turns(turns, tmp_path / "turns-run.png", tmp_path / "turns.png")
    plot_chaos_timeline(
        json.loads((RESULTS / "chaos-quick.json").read_text()), tmp_path / "chaos.png"
    )
    plot_load_timeline(json.loads((RESULTS / "load-short.json").read_text()), tmp_path / "load.png")
    for name in ("turns.png", "chaos.png", "load.png"):
        assert (tmp_path / name).stat().st_size > 20_000, name
    # Both scenario groups are drawn, each on its own axis (the point of the split).
    assert {"single_session", "concurrent"} <= set(turns)
    assert "automatic summarization" in SUMMARIZE_BAND
