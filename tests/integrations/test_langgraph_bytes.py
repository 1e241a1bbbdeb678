"""A chat whose messages use DeltaChannel writes the same bytes per turn at any length with
StatecoreSaver, snapshot turns included; with the default reducer the cost grows with the
conversation (which shows the measurement can tell the two apart). The 1,000-turn comparison
with LangGraph's own savers is bench/langgraph_bytes.py; its smoke run is here too."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integrations.langgraph_chat import build_chat, stored_bytes, user_message
from tests.integrations.langgraph_dbs import open_saver

ROOT = Path(__file__).resolve().parents[2]
TURNS = 120
#: DeltaChannel's default snapshot cadence: 100 updates, two per turn (input and reply).
SNAPSHOT_TURNS = 50


async def _bytes_per_turn(reducer: str) -> list[int]:
    async with open_saver("sqlite") as saver:
        graph = build_chat(reducer, saver)
        config = {"configurable": {"thread_id": reducer}}
        written, before = [], 0
        for turn in range(1, TURNS + 1):
            result = await graph.ainvoke(user_message(turn), config)
            after = await stored_bytes(saver.engine, "statecore")
            written.append(after - before)
            before = after
        assert len(result["messages"]) == 2 * TURNS
        return written


def _window(written: list[int], last_turn: int) -> list[int]:
    """The SNAPSHOT_TURNS turns ending at ``last_turn``: each such window holds one snapshot."""
    return written[last_turn - SNAPSHOT_TURNS : last_turn]


async def test_delta_channel_chat_writes_constant_bytes_per_turn() -> None:
    written = await _bytes_per_turn("delta")
    early, late = _window(written, 60), _window(written, TURNS)
    # Ordinary turns: the same bytes at turn 20 and at turn 120.
    assert abs(written[TURNS - 1] - written[19]) <= 0.05 * written[19]
    assert abs(statistics.median(late) - statistics.median(early)) <= 0.05 * statistics.median(
        early
    )
    # Snapshot turns too: the segment since the previous snapshot, not the whole history.
    assert max(late) <= 1.05 * max(early)
    assert abs(statistics.mean(late) - statistics.mean(early)) <= 0.05 * statistics.mean(early)


async def test_default_reducer_cost_grows_with_the_conversation() -> None:
    written = await _bytes_per_turn("default")
    assert written[TURNS - 1] > 4 * written[19]


@pytest.mark.slow
def test_bench_quick_run_writes_results_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "langgraph_bytes.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.langgraph_bytes",
            "--turns",
            "12",
            "--savers",
            "statecore-sqlite",
            "langgraph-sqlite",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert out.with_suffix(".png").stat().st_size > 10_000
    runs = {(r["saver"], r["reducer"]): r for r in result["runs"]}
    assert set(runs) == {
        (s, r) for s in ("statecore-sqlite", "langgraph-sqlite") for r in ("default", "delta")
    }
    for run in runs.values():
        assert len(run["bytes_per_turn"]) == 12 and all(b > 0 for b in run["bytes_per_turn"])
        assert run["at"]["10"]["put_ms"] > 0 and run["at"]["10"]["get_ms"] > 0
        assert sum(run["bytes_per_turn"]) == run["total_bytes"]
