"""The worker's per-session caches: how many entries and how many bytes each holds as more
and more sessions take turns.

    .venv/bin/python -m bench.worker_caches                     # 3,000 sessions, both databases
    .venv/bin/python -m bench.worker_caches --sessions 200      # a quick look

A worker process keeps, besides the SDK's workflow cache (1,000 workflows, measured by
``bench/open_sessions.py`` as RSS against cached sessions), three caches that grow with the
sessions it serves, all in the SQL store:

- the **window cache** (every database): each session's last context window, so its next
  turn reads only new rows; bounded by 20,000 messages and 4,000,000 tokens in all;
- the **header memos** (PostgreSQL): each session's header as this process's last commit left
  it, so its next chat turn commits in one statement; bounded by 1,000 sessions;
- the **token counter's texts**: counts of texts it has seen (system prompts, messages);
  bounded by 1,024 texts of at most 16,384 characters.

Here the real turn activity (offline model) commits two turns for each of N sessions against
a real database, and after every ``--every`` sessions the caches are counted and their deep
size in bytes measured (``sys.getsizeof`` over every object they reach, each counted once).
Writes ``bench/results/worker_caches.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from bench.harness.environment import machine_info
from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import CommitTurnInput, GenerateInput
from statecore.core._models import Message, SessionRef
from statecore.llm._offline import OfflineModel
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database, server_down_reason

ROOT = Path(__file__).resolve().parent.parent


def deep_size(root: Any) -> int:
    """Bytes of ``root`` and of everything it reaches, each object counted once (interned
    strings and small ints shared with the rest of the process included: an upper bound)."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, bool | type):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        children: Iterable[Any] = ()
        if isinstance(obj, dict):
            children = [*obj.keys(), *obj.values()]
        elif isinstance(obj, list | tuple | set | frozenset):
            children = obj
        elif hasattr(obj, "__dict__"):
            children = [vars(obj)]
        elif hasattr(obj, "__slots__"):
            children = [getattr(obj, s) for s in obj.__slots__ if hasattr(obj, s)]
        stack.extend(children)
    return total


def reading(store: SqlStateStore, sessions: int) -> dict[str, Any]:
    windows = store._windows
    memos = store._memos
    counter = store._counter._count_cached
    return {
        "sessions": sessions,
        "window_cache_sessions": len(windows._windows),
        "window_cache_messages": windows.held_messages,
        "window_cache_bytes": deep_size(windows._windows) + deep_size(windows._pk_by_key),
        "header_memos": len(memos) if memos is not None else None,
        "header_memo_bytes": deep_size(memos._memos) if memos is not None else None,
        "token_counter_texts": counter.cache_info().currsize,
    }


async def fill(url: str, sessions: int, every: int) -> list[dict[str, Any]]:
    await upgrade_database(url)
    store = await SqlStateStore.connect(url)
    resources = WorkerResources(models={"default": OfflineModel()})
    resources.attach(store)
    activities = TurnActivities(resources)
    env = ActivityEnvironment()
    rows = []
    try:
        for n in range(1, sessions + 1):
            ref = SessionRef(namespace="caches", agent_id="agent", session_id=f"s{n:05d}")
            for turn in (1, 2):
                turn_id = f"s{n}-t{turn}"
                message = Message(role="user", content=f"{turn_id}: what comes next, step {n}?")
                commit = CommitTurnInput(ref=ref, turn_id=turn_id, turn=turn, messages=[message])
                request = GenerateInput(ref=ref, turn_id=turn_id, pending=[message], commit=commit)
                await env.run(activities.generate, request)
            if n % every == 0 or n == sessions:
                rows.append(reading(store, n))
                print(f"  {rows[-1]}")
    finally:
        await store.close()
    return rows


async def run(sessions: int, every: int, dbs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for db in dbs:
        reason = await server_down_reason(db)
        if reason:
            out[db] = {"skipped": reason}
            continue
        print(db)
        async with fresh_database(db, "caches") as url:
            out[db] = await fill(url, sessions, every)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sessions", type=int, default=3000)
    p.add_argument("--every", type=int, default=250)
    p.add_argument("--db", nargs="+", default=["sqlite", "postgresql"])
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "worker_caches.json")
    a = p.parse_args(argv)
    result = {
        "benchmark": "worker_caches",
        "command": " ".join([".venv/bin/python -m bench.worker_caches", *sys.argv[1:]]),
        "machine": machine_info(),
        "method": "two turns per session through the real turn activity (offline model); "
        "after every --every sessions each cache's entries and deep size in bytes",
        "results": asyncio.run(run(a.sessions, a.every, a.db)),
    }
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
