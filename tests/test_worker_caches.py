"""Every per-session cache of a worker's store stays within its bound however many sessions
take turns, keeping the sessions used last; the cache benchmark's quick run reports them.

Real turn activity (offline model) against a real SQLite file and a real PostgreSQL database,
with the bounds made small so that a few sessions pass them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import CommitTurnInput, GenerateInput
from statecore.core._models import Message, SessionRef
from statecore.core._tokens import CACHED_TEXTS, TokenCounter
from statecore.llm._offline import OfflineModel
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from statecore.store.sql._header_memo import HeaderMemos
from tests.dbs import fresh_database

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = 12
MEMOS = 5
WINDOW_MESSAGES = 10
QUICK = ["--sessions", "6", "--every", "3", "--db", "sqlite"]


def _ref(n: int) -> SessionRef:
    return SessionRef(namespace="bounds", agent_id="agent", session_id=f"s{n:02d}")


@pytest.mark.parametrize(
    "dialect", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
async def test_store_caches_stay_bounded(dialect: str) -> None:
    async with fresh_database(dialect, "bounds") as url:
        await upgrade_database(url)
        store = await SqlStateStore.connect(url, window_cache_messages=WINDOW_MESSAGES)
        if dialect == "postgresql":
            store._memos = HeaderMemos(capacity=MEMOS)
        resources = WorkerResources(models={"default": OfflineModel()})
        resources.attach(store)
        activities = TurnActivities(resources)
        try:
            for n in range(SESSIONS):
                for turn in (1, 2):
                    turn_id = f"s{n}-t{turn}"
                    message = Message(role="user", content=f"{turn_id}: and then?")
                    commit = CommitTurnInput(
                        ref=_ref(n), turn_id=turn_id, turn=turn, messages=[message]
                    )
                    request = GenerateInput(
                        ref=_ref(n), turn_id=turn_id, pending=[message], commit=commit
                    )
                    await ActivityEnvironment().run(activities.generate, request)
                windows = store._windows
                assert 0 < windows.held_messages <= WINDOW_MESSAGES
                assert len(windows._pk_by_key) == len(windows._windows)  # no stray keys
                if store._memos is not None:
                    assert len(store._memos) == min(n + 1, MEMOS)
            # The sessions kept are the ones used last.
            newest = {key[2] for key in store._windows._pk_by_key}
            assert f"s{SESSIONS - 1:02d}" in newest and "s00" not in newest
            if store._memos is not None:
                kept = {key[2] for key in store._memos._memos}
                assert kept == {f"s{n:02d}" for n in range(SESSIONS - MEMOS, SESSIONS)}
        finally:
            await store.close()


def test_token_counter_remembers_a_bounded_number_of_texts() -> None:
    counter = TokenCounter()
    for n in range(CACHED_TEXTS + 100):
        counter.count_text(f"text number {n}")
    assert counter._count_cached.cache_info().currsize == CACHED_TEXTS


@pytest.mark.slow
def test_cache_benchmark_quick(tmp_path: Path) -> None:
    out = tmp_path / "caches.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.worker_caches", *QUICK, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())["results"]["sqlite"]
    assert [r["sessions"] for r in rows] == [3, 6]
    assert rows[1]["window_cache_sessions"] == 6
    assert rows[1]["window_cache_bytes"] > rows[0]["window_cache_bytes"] > 0
    assert rows[1]["header_memos"] is None  # SQLite keeps none
