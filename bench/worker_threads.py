"""Which threads of the worker spend an AgentSession turn's CPU, against the floor worker's.

    .venv/bin/python bench/worker_threads.py                  # SQLite, 6 rounds x 300 turns
    .venv/bin/python bench/worker_threads.py --db postgresql
    .venv/bin/python bench/worker_threads.py --rounds 2 --turns 50   # smoke

``bench/cpu_per_turn.py --floor`` gives statecore's own cost as one number: the worker
process's CPU per turn minus the floor worker's. This splits both by thread, read from
``/proc/<pid>/task/<tid>/stat`` around the measured turns:

- ``event loop``: the process's main thread, where asyncio runs the activities (statecore's
  turn activity, SQLAlchemy, on SQLite the statements run in place), payload conversion and
  the handling of workflow activations;
- ``temporal core``: the Rust SDK core's threads (``tokio-rt-worker``): polling, history,
  gRPC to the server;
- ``workflow``: the threads that run workflow code (``workflow-processing``);
- ``other``: every other thread (SQLite connections' threads, executors).

Each round runs the real ``statecore worker`` (offline model, one fresh session on a fresh
database) and ``bench/floor_worker.py`` (one no-op regular activity per Update), in an
order that alternates; 20 warm-up turns, then ``--turns`` measured. Per group: the mean over
rounds with a 95% interval, and statecore minus floor paired by round. Writes
``bench/results/worker_threads_<db>.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections import defaultdict  # noqa: E402
from tempfile import TemporaryDirectory  # noqa: E402
from typing import Any  # noqa: E402

from temporalio.client import Client  # noqa: E402

from bench.cpu_per_turn import summary  # noqa: E402
from bench.environment import machine_info  # noqa: E402
from bench.measure import floor_scenario  # noqa: E402
from bench.profile_turn import CONTENT, database  # noqa: E402
from bench.worker_process import worker_process  # noqa: E402
from statecore.temporal._client import AgentSessionClient  # noqa: E402
from statecore.temporal._converter import statecore_data_converter  # noqa: E402
from statecore.temporal._devserver import start_dev_server  # noqa: E402

RESULTS = ROOT / "bench" / "results"
GROUPS = ("event loop", "temporal core", "workflow", "other")
_TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of ``pid``'s live threads, summed by group (see the module doc)."""
    found: dict[str, float] = defaultdict(float)
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            raw = (task / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended between listing and reading
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        found[group_of(int(task.name) == pid, name)] += (int(fields[11]) + int(fields[12])) / _TICK
    return found


def group_of(is_main: bool, name: str) -> str:
    if is_main:
        return "event loop"
    if name.startswith("tokio"):
        return "temporal core"
    if name.startswith("workflow"):
        return "workflow"
    return "other"


def per_turn(before: dict[str, float], after: dict[str, float], turns: int) -> dict[str, float]:
    return {g: 1000 * (after.get(g, 0.0) - before.get(g, 0.0)) / turns for g in GROUPS}


async def agent_run(address: str, db: str, tmp: Path, warmup: int, turns: int) -> dict[str, float]:
    run_dir = tmp / uuid.uuid4().hex[:8]
    run_dir.mkdir()
    async with database(db, run_dir) as url, worker_process(address, url, log_dir=run_dir) as w:
        client = await Client.connect(address, data_converter=statecore_data_converter())
        sessions = AgentSessionClient(client, task_queue=w.task_queue)
        session = f"threads-{uuid.uuid4().hex[:8]}"
        for n in range(warmup):
            await sessions.send("bench", session, CONTENT.format(n=n))
        start = thread_cpu(w.pid)
        for n in range(warmup, warmup + turns):
            await sessions.send("bench", session, CONTENT.format(n=n))
        return per_turn(start, thread_cpu(w.pid), turns)


async def floor_run(address: str, tmp: Path, warmup: int, turns: int) -> dict[str, float]:
    run_dir = tmp / uuid.uuid4().hex[:8]
    run_dir.mkdir()
    async with worker_process(address, "", log_dir=run_dir, floor=True) as w:
        client = await Client.connect(address)
        floor = floor_scenario("floor", "", client, w.task_queue, "turn")
        session = f"threads-{uuid.uuid4().hex[:8]}"
        for n in range(warmup):
            await floor.send(session, n, f"t{n}")
        start = thread_cpu(w.pid)
        for n in range(warmup, warmup + turns):
            await floor.send(session, n, f"t{n}")
        return per_turn(start, thread_cpu(w.pid), turns)


async def measure(a: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    rounds: list[dict[str, dict[str, float]]] = []
    with TemporaryDirectory(prefix="statecore-threads-") as tmp_text:
        tmp = Path(tmp_text)
        server = await start_dev_server(db_filename=str(tmp / "temporal.db"))
        try:
            for r in range(a.rounds):
                got: dict[str, dict[str, float]] = {}
                for kind in ("statecore", "floor") if r % 2 == 0 else ("floor", "statecore"):
                    if kind == "floor":
                        got[kind] = await floor_run(server.address, tmp, a.warmup, a.turns)
                    else:
                        got[kind] = await agent_run(server.address, a.db, tmp, a.warmup, a.turns)
                    shown = ", ".join(f"{g} {v:.2f}" for g, v in got[kind].items())
                    print(f"round {r + 1}/{a.rounds} {kind}: {shown} ms CPU/turn", flush=True)
                rounds.append(got)
        finally:
            server.stop()
    table: dict[str, Any] = {}
    for group in (*GROUPS, "total"):

        def value(kind: str, got: dict[str, dict[str, float]], group: str = group) -> float:
            return sum(got[kind].values()) if group == "total" else got[kind][group]

        table[group] = {
            "statecore": summary([value("statecore", g) for g in rounds]),
            "floor": summary([value("floor", g) for g in rounds]),
            "statecore_minus_floor": summary(
                [value("statecore", g) - value("floor", g) for g in rounds]
            ),
        }
    return {
        "db": a.db,
        "what": "worker CPU ms per turn by thread group: statecore worker and floor worker",
        "rounds": a.rounds,
        "turns_per_run": a.turns,
        "warmup_turns": a.warmup,
        "groups": table,
        "per_round": rounds,
        "wall_minutes": round((time.monotonic() - started) / 60, 1),
        "machine": machine_info(),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--turns", type=int, default=300, help="measured turns per run")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--out", type=Path, help="default: bench/results/worker_threads_<db>.json")
    a = p.parse_args(argv)
    if a.rounds < 2:
        p.error("--rounds must be at least 2 for a confidence interval")
    result = asyncio.run(measure(a))
    for group, row in result["groups"].items():
        s, f, d = row["statecore"], row["floor"], row["statecore_minus_floor"]
        print(
            f"{group:>13}: statecore {s['mean']:.2f}, floor {f['mean']:.2f}, "
            f"difference {d['mean']:.2f} (95% CI {d['ci95'][0]:.2f} .. {d['ci95'][1]:.2f})"
        )
    out = a.out or RESULTS / f"worker_threads_{a.db}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
