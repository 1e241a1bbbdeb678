"""The Google ADK side-by-side benchmark runs end to end in a few turns, and says the right
things: the official integration's history per turn grows with the conversation, statecore's
stays flat.

Side (a) needs the separate environment ``scripts/setup.sh test`` builds
(``.cache/venv-official-google-adk``); without it only side (b) runs, and the test says so.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.side_by_side_run import official_environment_built, run_quick

TURNS = 5

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def check_statecore(side: dict) -> None:
    assert side["turns_done"] == TURNS and side["stopped_by"] is None
    assert side["last_reply"].startswith("The weather in ")
    per_turn = side["series"]["history_bytes_per_turn"]
    assert all(per_turn)
    steady = per_turn[2:]
    assert max(steady) <= min(steady) * 1.1, per_turn


def test_side_by_side_quick(tmp_path: Path) -> None:
    if not official_environment_built("google-adk"):
        result = run_quick("google_adk_side_by_side", tmp_path, TURNS, "--no-official")
        check_statecore(result["sides"]["statecore"])
        pytest.skip("side (a) not run: .cache/venv-official-google-adk is missing")
    result = run_quick("google_adk_side_by_side", tmp_path, TURNS)
    official, statecore = result["sides"]["official"], result["sides"]["statecore"]
    check_statecore(statecore)
    assert official["turns_done"] == TURNS and official["status"] == "COMPLETED"
    assert official["versions"]["temporalio-google-adk"] == "0.0.1"
    # The same agent and model: the same answer to the last turn.
    assert official["last_reply"] == statecore["last_reply"]
    grows = official["series"]["history_bytes_per_turn"]
    # Every model call carries the session so far: each turn costs more than the last.
    assert all(later > earlier for earlier, later in itertools.pairwise(grows))
    assert grows[-1] > statecore["series"]["history_bytes_per_turn"][-1]
