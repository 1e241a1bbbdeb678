"""The short chaos run: worker kills, a Temporal restart and a PostgreSQL outage, nothing lost.

The long run is `python -m bench.chaos` (results in bench/results/chaos.json)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def skip_if_it_cannot_run(returncode: int, output: str) -> None:
    """The chaos run needs a private PostgreSQL (its binaries, and root to run it as the
    postgres user); without one it says why and exits with status 2 before anything starts."""
    if returncode == 2 and "chaos: cannot run: " in output:
        pytest.skip(output.split("chaos: cannot run: ", 1)[1].strip())


def test_quick_chaos_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.chaos", "--quick", "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        # Interrupt, not kill: the run's cleanup stops its workers, dev server and private
        # PostgreSQL, which a SIGKILL would leave running.
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
        raise AssertionError(
            "the quick chaos run took over 10 minutes:\n" + output[-3000:]
        ) from None
    skip_if_it_cannot_run(proc.returncode, output)
    assert proc.returncode == 0, output[-6000:]
    figures = json.loads(out.read_text())["figures"]
    assert figures["worker_kills"] == 3
    assert figures["server_restarts"] == 1
    assert figures["db_outages"] == 1
    assert figures["turns_completed"] == figures["turns_planned"] == 40
    for zero in ("lost", "duplicated", "out_of_order", "stuck_sessions", "describe_mismatches"):
        assert figures[zero] == 0, (zero, figures)
    # The timeline the figure is drawn from: every event, every completed turn, in time.
    timeline = json.loads(out.read_text())["timeline"]
    kinds = [event["kind"] for event in timeline["events"]]
    assert sorted(kinds) == sorted(
        ["worker SIGKILL"] * 3 + ["Temporal restart", "PostgreSQL outage"]
    )
    assert all(event["lasted_seconds"] > 0 for event in timeline["events"])
    done_at = timeline["turn_completed_seconds"]
    assert len(done_at) == 40 and done_at == sorted(done_at)
    assert (tmp_path / "chaos-timeline.png").stat().st_size > 10_000


def test_quick_two_worker_chaos_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Two workers on one queue, a random one SIGKILLed every 3-9 s, turn ids re-sent on
    purpose, continue-as-new every 3 turns, pauses and resumes."""
    out = tmp_path / "chaos-two-workers.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.chaos",
            "--topology",
            "two-workers",
            "--quick",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
        raise AssertionError("the quick two-worker run took over 10 minutes") from None
    skip_if_it_cannot_run(proc.returncode, output)
    assert proc.returncode == 0, output[-6000:]
    figures = json.loads(out.read_text())["figures"]
    assert figures["turns_completed"] == figures["turns_planned"] == 12
    assert figures["worker_kills"] >= 1
    assert figures["duplicate_resends"] >= 1
    assert figures["continue_as_new"] >= 2
    for zero in ("lost", "duplicated", "out_of_order", "stuck_sessions", "describe_mismatches"):
        assert figures[zero] == 0, (zero, figures)
    assert not figures["problems"], figures["problems"]
