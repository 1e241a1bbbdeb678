"""``python -m bench.streaming`` runs end to end in a small configuration and writes results
that make sense. Run as a program (tests do not import bench); no timing thresholds here:
the figures and their targets are in docs/streaming.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.worker_cli import REPO

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def test_the_streaming_bench_runs_and_reports(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.streaming", "--turns", "3", "--dialects", "sqlite",
         "--pieces", "10", "--gap-ms", "10", "--think-ms", "50", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "results.json").read_text())
    assert (tmp_path / "streaming.png").stat().st_size > 0
    sqlite = result["statecore"]["sqlite"]
    assert sqlite["ttft_ms"]["n"] == 3 and sqlite["piece_delay_ms"]["n"] == 30
    assert sqlite["stream_rows_left_after"] == 0
    streamed, sent = sqlite["history_streamed_session"], sqlite["history_unstreamed_session"]
    assert streamed["events"] == sent["events"]
    # Each streamed turn's model call carries its stream flag, and nothing else more.
    flag = len(',"stream":true')
    assert streamed["activity_payload_bytes"] - sent["activity_payload_bytes"] == 3 * flag


def test_the_side_by_side_runs_and_shows_the_difference(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.streaming_side_by_side", "--turns", "1", "--pieces", "12",
         "--gap-ms", "10", "--think-ms", "50", "--fail-after", "4", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "side_by_side.json").read_text())
    clean, failed = result["clean"], result["first_attempt_fails"]
    assert clean["official"]["reader_text_equals_reply"] == [True]
    assert clean["statecore"]["reader_text_equals_reply"] == [True]
    # After a failed first attempt the official reader holds both attempts' text; statecore's
    # saw a restart and ends with the reply.
    assert failed["official"]["reader_text_equals_reply"] == [False]
    assert failed["statecore"]["reader_text_equals_reply"] == [True]
    assert failed["statecore"]["restarts_seen"] == [1]
