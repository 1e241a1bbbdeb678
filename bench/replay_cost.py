"""Where an uncached turn's time goes: the replay of a session's current run, taken apart.

    .venv/bin/python -m bench.replay_cost                    # runs of 10, 100, 500, 1,000 turns
    .venv/bin/python -m bench.replay_cost --turns 10 100     # a quick look

A turn on a session the worker no longer holds in its workflow cache first fetches the run's
whole history from the server and replays it: the SDK feeds every event to the workflow code
again, which re-runs each past turn's handler (decoding its update input and its activity's
result, building the activity input it scheduled) without calling any activity. This script
opens one AgentSession per run length (SQLite, offline model, continue-as-new suggestion moved
out of the way so a run can hold 1,000 turns), then for each:

- **fetch**: ``fetch_history()`` from the dev server (server read + transfer + decode here);
- **replay**: ``Replayer.replay_workflow`` on that history, the worker's own share, best of 3;
- **profile**: one replay under cProfile, its time split by where it was spent (pydantic,
  Temporal's payload conversion, the SDK's workflow machinery, statecore's workflow code).

Writes ``bench/results/replay_cost.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from bench.harness.environment import machine_info
from statecore.agent_session import WORKFLOWS
from statecore.store._migrate import upgrade_database
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._converter import statecore_data_converter
from statecore.temporal._devserver import start_dev_server
from statecore.temporal._plugin import StatecorePlugin, workflow_runner

ROOT = Path(__file__).resolve().parent.parent
CONTENT = "turn {n}: please look at what we have so far and suggest the next step."
#: Where cProfile's time is attributed, by the file of the function that spent it (own time).
BUCKETS = (
    ("pydantic", ("pydantic",)),
    ("payload conversion", ("temporalio/converter", "temporalio/contrib/pydantic")),
    ("statecore workflow code", ("statecore/",)),
    ("SDK workflow machinery", ("temporalio/worker/_workflow", "temporalio/workflow")),
    ("SDK bridge and protobuf", ("temporalio/bridge", "google/protobuf", "temporalio/api")),
)


def bucket_of(filename: str) -> str:
    for name, needles in BUCKETS:
        if any(needle in filename for needle in needles):
            return name
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C)"
    return "other Python"


async def build_session(sessions: AgentSessionClient, agent: str, turns: int) -> str:
    session = f"replay-{turns}"
    for n in range(turns):
        await sessions.send(
            agent,
            session,
            CONTENT.format(n=n),
            turn_id=f"{session}-{n}",
            max_turns_per_run=1900,
            idle_continue_seconds=0,  # the short runs wait for the long: keep their run
        )
    return sessions.workflow_id(agent, session)


async def measure(client: Client, workflow_id: str, turns: int) -> dict[str, Any]:
    replayer = Replayer(
        workflows=WORKFLOWS,
        data_converter=statecore_data_converter(),
        workflow_runner=workflow_runner(),
    )
    handle = client.get_workflow_handle(workflow_id)
    fetches = []
    for _ in range(3):
        t0 = time.perf_counter()
        history = await handle.fetch_history()
        fetches.append(time.perf_counter() - t0)
    events = len(history.events)
    size = sum(e.ByteSize() for e in history.events)
    replays = []
    for _ in range(3):
        t0 = time.perf_counter()
        result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
        replays.append(time.perf_counter() - t0)
        assert result.replay_failure is None
    # The workflow code runs on the replayer's executor thread: profile that thread (and
    # this one, where the SDK's side of each activation runs) during one more replay.
    thread_prof = cProfile.Profile()
    executor = ThreadPoolExecutor(max_workers=1, initializer=thread_prof.enable)
    profiled_replayer = Replayer(
        workflows=WORKFLOWS,
        data_converter=statecore_data_converter(),
        workflow_runner=workflow_runner(),
        workflow_task_executor=executor,
    )
    executor.submit(lambda: None).result()  # the thread exists and profiles
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    await profiled_replayer.replay_workflow(history, raise_on_replay_failure=True)
    prof.disable()
    profiled = time.perf_counter() - t0
    executor.submit(thread_prof.disable).result()
    executor.shutdown()
    stats = pstats.Stats(prof)
    stats.add(thread_prof)
    # Time the main thread spent waiting for the workflow thread is not work.
    waits = (
        "poll' of 'select.epoll",
        "get' of '_queue.SimpleQueue",
        "select (",
        "_run_once",
        "acquire' of '_thread.lock",
    )
    split: dict[str, float] = {}
    top: list[tuple[float, str]] = []
    for (filename, line, func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if any(w in f"{func} ({filename}" for w in waits):
            continue
        name = bucket_of(filename)
        split[name] = split.get(name, 0.0) + tottime
        top.append((tottime, f"{func} ({filename.split('site-packages/')[-1]}:{line})"))
    top.sort(reverse=True)
    profiled_total = sum(split.values())
    return {
        "turns_in_run": turns,
        "events": events,
        "history_bytes": size,
        "fetch_ms_best": round(min(fetches) * 1000, 1),
        "replay_ms_best": round(min(replays) * 1000, 1),
        "replay_us_per_event": round(min(replays) * 1e6 / events, 1),
        "replay_ms_per_turn_in_run": round(min(replays) * 1000 / turns, 3),
        "profiled_replay_ms": round(profiled * 1000, 1),
        "profiled_work_ms": round(sum(split.values()) * 1000, 1),
        "profile_share": {
            k: round(v / profiled_total, 3) for k, v in sorted(split.items(), key=lambda x: -x[1])
        },
        "profile_top_own_time": [
            {"function": name, "ms": round(t * 1000, 1)} for t, name in top[:15]
        ],
    }


async def run(turn_counts: list[int]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="statecore-replay-") as tmp:
        server = await start_dev_server(
            db_filename=str(Path(tmp) / "temporal.db"),
            log_path=str(Path(tmp) / "temporal.log"),
            # Let one run hold 1,000 turns (~11,000 events) without the server's suggestion.
            dynamic_config={"limit.historyCount.suggestContinueAsNew": "40000"},
        )
        try:
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'statecore.db'}"
            await upgrade_database(url)
            plugin = StatecorePlugin(url)
            client = await Client.connect(server.address, plugins=[plugin])
            queue = f"replay-{uuid.uuid4().hex[:8]}"
            sessions = AgentSessionClient(client, task_queue=queue)
            agent = "replay-agent"
            async with Worker(client, task_queue=queue):
                ids = await asyncio.gather(
                    *(build_session(sessions, agent, n) for n in turn_counts)
                )
            rows = [await measure(client, wid, n) for wid, n in zip(ids, turn_counts, strict=True)]
        finally:
            server.stop()
    return {
        "benchmark": "replay_cost",
        "machine": machine_info(),
        "method": "one AgentSession per run length on SQLite (offline model); the run's "
        "history fetched three times and replayed three times with temporalio's Replayer "
        "(best of three each), then once under cProfile (own time per function, bucketed "
        "by the function's file)",
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--turns", type=int, nargs="+", default=[10, 100, 500, 1000])
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "replay_cost.json")
    a = p.parse_args(argv)
    result = asyncio.run(run(a.turns))
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    for row in result["rows"]:
        print(
            f"{row['turns_in_run']:>5} turns, {row['events']:>6} events, "
            f"{row['history_bytes'] / 1024:8.0f} KiB: fetch {row['fetch_ms_best']:7.1f} ms, "
            f"replay {row['replay_ms_best']:7.1f} ms ({row['replay_us_per_event']} us/event)"
        )
        print("       ", row["profile_share"])
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
