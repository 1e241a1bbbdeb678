"""The OpenAI Agents side-by-side benchmark runs end to end in a few turns, and says the right
things: the official integration's history per turn grows with the conversation, statecore's
stays flat.

Side (a) needs the separate environment ``scripts/setup.sh test`` builds
(``.cache/venv-official``); without it only side (b) runs, and the test says so. No timing
thresholds: speed belongs to the benchmark's report, not to a test a busy machine makes flaky.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.side_by_side_run import official_environment_built, run_quick

TURNS = 5

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def run_bench(folder: Path, *extra: str) -> dict:
    return run_quick("openai_agents_side_by_side", folder, TURNS, *extra)


def check_statecore(side: dict) -> None:
    assert side["turns_done"] == TURNS and side["stopped_by"] is None
    assert side["last_reply"].startswith("The weather in ")
    per_turn = side["series"]["history_bytes_per_turn"]
    assert all(per_turn)
    # Flat: the first turn also carries the run's start, and the second the once-a-run marker
    # of the sparse StatecoreTurn upsert; from the third on, turns cost the same.
    steady = per_turn[2:]
    assert max(steady) <= min(steady) * 1.1, per_turn
    assert side["history_bytes_total"] >= sum(per_turn)
    assert side["latency"]["turns"] == TURNS and side["latency"]["p50_ms"] > 0


def test_side_by_side_quick(tmp_path: Path) -> None:
    if not official_environment_built("openai-agents"):
        result = run_bench(tmp_path, "--no-official")
        check_statecore(result["sides"]["statecore"])
        assert result["sides"]["official"] == {"skipped": "--no-official"}
        pytest.skip("side (a) not run: .cache/venv-official is missing (scripts/setup.sh test)")
    result = run_bench(tmp_path)
    official, statecore = result["sides"]["official"], result["sides"]["statecore"]
    check_statecore(statecore)
    assert official["turns_done"] == TURNS and official["status"] == "COMPLETED"
    assert official["versions"]["temporalio-openai-agents"] == "1.1.0"
    # The same model server and prompts: the same answer to the last turn.
    assert official["last_reply"] == statecore["last_reply"]
    grows = official["series"]["history_bytes_per_turn"]
    # Every model call carries the conversation so far: each turn costs more than the last.
    assert all(later > earlier for earlier, later in itertools.pairwise(grows))
    assert grows[-1] > 2 * statecore["series"]["history_bytes_per_turn"][-1]
