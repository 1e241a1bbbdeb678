"""The Pydantic AI side-by-side benchmark runs end to end in a few turns, and says the right
things: under Pydantic AI's own Temporal integration the history each turn adds grows with the
conversation (every model activity carries the messages so far), under statecore it stays flat.

Side (a) needs the separate environment ``scripts/setup.sh test`` builds
(``.cache/venv-official-pydantic-ai``); without it only side (b) runs, and the test says so.
No timing thresholds: speed belongs to the benchmark's report.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.side_by_side_run import official_environment_built, run_quick

TURNS = 5
#: The city the benchmark's prompt for turn 5 names (its cities, in order: Lisbon, Oslo,
#: Nairobi, Lima, Osaka, Quebec, ...; turn n asks about the (n mod 9)th).
LAST_CITY = "Quebec"

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def check_statecore(side: dict) -> None:
    assert side["turns_done"] == TURNS and side["stopped_by"] is None
    assert side["last_reply"].startswith(f"The weather in {LAST_CITY} right now: ")
    per_turn = side["series"]["history_bytes_per_turn"]
    steady = per_turn[2:]  # the first turn also carries the run's start
    assert max(steady) <= min(steady) * 1.1, per_turn


def test_pydantic_ai_side_by_side_quick(tmp_path: Path) -> None:
    if not official_environment_built("pydantic-ai"):
        result = run_quick("pydantic_ai_side_by_side", tmp_path, TURNS, "--no-official")
        check_statecore(result["sides"]["statecore"])
        pytest.skip(
            "side (a) not run: .cache/venv-official-pydantic-ai is missing (scripts/setup.sh test)"
        )
    result = run_quick("pydantic_ai_side_by_side", tmp_path, TURNS)
    official, statecore = result["sides"]["official"], result["sides"]["statecore"]
    check_statecore(statecore)
    assert official["turns_done"] == TURNS and official["status"] == "COMPLETED"
    assert official["versions"]["pydantic-ai-slim"] == "2.68.0"
    assert official["workflow_task_failures"] == []
    # The same agent and model: the same answer to the last turn.
    assert official["last_reply"] == statecore["last_reply"]
    grows = official["series"]["history_bytes_per_turn"]
    assert all(later > earlier for earlier, later in itertools.pairwise(grows))
    assert grows[-1] > 2 * statecore["series"]["history_bytes_per_turn"][-1]
    assert official["largest_activity_input_bytes"] > statecore["largest_activity_input_bytes"]
