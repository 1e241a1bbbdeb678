"""The LangGraph side-by-side benchmark runs end to end in a few turns, and says the right
things: under Temporal's official plugin the history each turn adds grows with the
conversation (every node's activity carries the whole graph state), under statecore it stays
flat.

Side (a) needs the separate environment ``scripts/setup.sh test`` builds
(``.cache/venv-official-langgraph``); without it only side (b) runs, and the test says so. No
timing thresholds: speed belongs to the benchmark's report, not to a test a busy machine makes
flaky.
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


def run_bench(folder: Path, *extra: str) -> dict:
    return run_quick("langgraph_side_by_side", folder, TURNS, *extra)


def check_statecore(side: dict) -> None:
    assert side["turns_done"] == TURNS and side["stopped_by"] is None
    # The tool ran: the answer is built from get_weather's result.
    assert side["last_reply"].startswith(f"The weather in {LAST_CITY} right now: ")
    per_turn = side["series"]["history_bytes_per_turn"]
    assert all(per_turn)
    # Flat: the first turn also carries the run's start, and the second the once-a-run marker
    # of the sparse StatecoreTurn upsert; from the third on, turns cost the same.
    steady = per_turn[2:]
    assert max(steady) <= min(steady) * 1.1, per_turn
    assert side["history_bytes_total"] >= sum(per_turn)
    assert side["database_file_bytes"] > 0


def test_langgraph_side_by_side_quick(tmp_path: Path) -> None:
    if not official_environment_built("langgraph"):
        result = run_bench(tmp_path, "--no-official")
        check_statecore(result["sides"]["statecore"])
        assert result["sides"]["official"] == {"skipped": "--no-official"}
        pytest.skip(
            "side (a) not run: .cache/venv-official-langgraph is missing (scripts/setup.sh test)"
        )
    result = run_bench(tmp_path)
    official, statecore = result["sides"]["official"], result["sides"]["statecore"]
    check_statecore(statecore)
    assert official["turns_done"] == TURNS and official["status"] == "COMPLETED"
    assert official["versions"]["temporalio-langgraph"] == "0.1.0"
    assert official["workflow_task_failures"] == []
    # The same graph and prompts: the same answer to the last turn.
    assert official["last_reply"] == statecore["last_reply"]
    grows = official["series"]["history_bytes_per_turn"]
    # Every activity carries the thread so far: each turn costs more than the last.
    assert all(later > earlier for earlier, later in itertools.pairwise(grows))
    assert grows[-1] > 2 * statecore["series"]["history_bytes_per_turn"][-1]
    assert official["largest_activity_input_bytes"] > statecore["largest_activity_input_bytes"]
