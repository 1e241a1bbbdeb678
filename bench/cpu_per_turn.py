"""Worker CPU per AgentSession turn, one statecore version against another, interleaved.

    .venv/bin/python -m bench.cpu_per_turn --before 2c8aef7              # SQLite
    .venv/bin/python -m bench.cpu_per_turn --before 2c8aef7 --db postgresql
    .venv/bin/python -m bench.cpu_per_turn --before 2c8aef7 --rounds 2 --turns 50  # smoke
    .venv/bin/python -m bench.cpu_per_turn --before 2c8aef7 --floor      # and the floor

Latency on a shared machine measures the other users as much as statecore; CPU time of the
worker process does not (see bench/harness/worker_process.py). Each round runs both versions, in an
order that alternates from round to round (A B, B A, ...), each as the real ``statecore
worker`` in its own process on a fresh database with one fresh session: warm-up turns, then
``--turns`` measured turns whose worker CPU (user + system, ``/proc/<pid>/stat``) is divided
by their number. Reported per version: the mean over rounds with a 95% confidence interval
(Student's t), and the paired difference after - before with its own interval, since rounds
share the machine's state. With ``--floor`` each round also runs ``bench/harness/floor_worker.py``
(Temporal's floor: an Update running one no-op regular activity, nothing of statecore) the
same way, and each version's own cost is reported as its CPU minus the floor's, paired by
round. Writes ``bench/results/cpu_per_turn_<db>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from temporalio.client import Client

from bench.harness.environment import machine_info
from bench.harness.measure import floor_scenario
from bench.harness.worker_process import export_commit, worker_process
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._converter import statecore_data_converter
from statecore.temporal._devserver import start_dev_server
from tests.dbs import create_database, drop_database, server_down_reason

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CONTENT = "turn {n}: please look at what we have so far and suggest the next step."
# Two-sided 95% Student's t quantiles by degrees of freedom (beyond 30: the normal's 1.96).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}  # fmt: skip


@asynccontextmanager
async def database(db: str, tmp: Path) -> AsyncIterator[str]:
    """A fresh database URL for ``db`` (dropped afterwards on PostgreSQL)."""
    if db == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp / 'turns.db'}"
        return
    reason = await server_down_reason(db)
    if reason is not None:
        raise SystemExit(f"{db} is not reachable: {reason}")
    url = await create_database(db, "cpu")
    try:
        yield url
    finally:
        await drop_database(url)


def t95(df: int) -> float:
    return _T95[max(k for k in _T95 if k <= df)] if df <= 30 else 1.96


def summary(values: list[float]) -> dict[str, Any]:
    """Mean with its 95% confidence interval (half-width), and the values themselves."""
    mean = statistics.fmean(values)
    half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return {
        "mean": round(mean, 3),
        "ci95": [round(mean - half, 3), round(mean + half, 3)],
        "values": [round(v, 3) for v in values],
    }


def ratio_summary(ratios: list[float]) -> dict[str, Any]:
    """Geometric mean of ratios with its 95% interval (taken on their logarithms, where a
    ratio of 2 and one of 1/2 are equally far from 1, and one slow round cannot dominate)."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    half = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return {
        "geometric_mean": round(math.exp(mean), 3),
        "ci95": [round(math.exp(mean - half), 3), round(math.exp(mean + half), 3)],
        "values": [round(r, 3) for r in ratios],
    }


async def one_run(address: str, db: str, code: Path, tmp: Path, warmup: int, turns: int) -> float:
    """Worker CPU milliseconds per measured turn of one fresh session on a fresh database."""
    run_dir = tmp / uuid.uuid4().hex[:8]
    run_dir.mkdir()
    async with (
        database(db, run_dir) as url,
        worker_process(address, url, code=code, log_dir=run_dir) as worker,
    ):
        client = await Client.connect(address, data_converter=statecore_data_converter())
        sessions = AgentSessionClient(client, task_queue=worker.task_queue)
        session = f"cpu-{uuid.uuid4().hex[:8]}"
        for n in range(warmup):
            await sessions.send("bench", session, CONTENT.format(n=n))
        cpu0 = worker.cpu_seconds()
        for n in range(warmup, warmup + turns):
            await sessions.send("bench", session, CONTENT.format(n=n))
        return 1000 * (worker.cpu_seconds() - cpu0) / turns


async def floor_run(address: str, tmp: Path, warmup: int, turns: int) -> float:
    """Worker CPU milliseconds per measured turn of the floor worker, driven like a session."""
    run_dir = tmp / uuid.uuid4().hex[:8]
    run_dir.mkdir()
    async with worker_process(address, "", log_dir=run_dir, floor=True) as worker:
        client = await Client.connect(address)
        floor = floor_scenario("floor", "", client, worker.task_queue, "turn")
        session = f"cpu-{uuid.uuid4().hex[:8]}"
        for n in range(warmup):
            await floor.send(session, n, f"t{n}")
        cpu0 = worker.cpu_seconds()
        for n in range(warmup, warmup + turns):
            await floor.send(session, n, f"t{n}")
        return 1000 * (worker.cpu_seconds() - cpu0) / turns


async def compare(a: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    load_start = os.getloadavg()
    with TemporaryDirectory(prefix="statecore-cpu-") as tmp_text:
        tmp = Path(tmp_text)
        versions = {
            "before": export_commit(a.before, tmp / "code"),
            "after": export_commit(a.after, tmp / "code") if a.after else ROOT,
        }
        server = await start_dev_server(db_filename=str(tmp / "temporal.db"))
        per_round: list[dict[str, float]] = []
        try:
            for r in range(a.rounds):
                order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
                if a.floor:  # the floor takes each place in turn
                    order.insert(r % 3, "floor")
                got: dict[str, float] = {}
                for name in order:
                    if name == "floor":
                        got[name] = await floor_run(server.address, tmp, a.warmup, a.turns)
                    else:
                        got[name] = await one_run(
                            server.address, a.db, versions[name], tmp, a.warmup, a.turns
                        )
                    print(f"round {r + 1}/{a.rounds} {name}: {got[name]:.2f} ms CPU/turn")
                per_round.append(got)
        finally:
            server.stop()
    before = [g["before"] for g in per_round]
    after = [g["after"] for g in per_round]
    diff = [g["after"] - g["before"] for g in per_round]
    own: dict[str, Any] = {}
    if a.floor:
        own = {
            "floor": summary([g["floor"] for g in per_round]),
            "before_minus_floor": summary([g["before"] - g["floor"] for g in per_round]),
            "after_minus_floor": summary([g["after"] - g["floor"] for g in per_round]),
        }
    return {
        "db": a.db,
        "what": "CPU ms of the statecore worker process per AgentSession turn (offline model)",
        "before_revision": a.before,
        "after_revision": a.after or "working tree",
        "rounds": a.rounds,
        "turns_per_run": a.turns,
        "warmup_turns": a.warmup,
        "before": summary(before),
        "after": summary(after),
        "after_minus_before": summary(diff),
        "after_over_before": round(statistics.fmean(after) / statistics.fmean(before), 3),
        **own,
        "wall_minutes": round((time.monotonic() - started) / 60, 1),
        "load_average_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
        "machine": machine_info(),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--before", required=True, help="commit of the 'before' statecore")
    p.add_argument("--after", help="commit of the 'after' statecore (default: this tree)")
    p.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--turns", type=int, default=200, help="measured turns per run")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--out", type=Path, help="default: bench/results/cpu_per_turn_<db>.json")
    p.add_argument(
        "--floor", action="store_true", help="also run the floor worker; report each minus it"
    )
    a = p.parse_args(argv)
    if a.rounds < 2:
        p.error("--rounds must be at least 2 for a confidence interval")
    result = asyncio.run(compare(a))
    out = a.out or RESULTS / f"cpu_per_turn_{a.db}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    keys = ["before", "after", "after_minus_before"]
    if a.floor:
        keys += ["floor", "before_minus_floor", "after_minus_floor"]
    for key in keys:
        s = result[key]
        print(f"{key}: {s['mean']:.2f} ms/turn, 95% CI {s['ci95'][0]:.2f} .. {s['ci95'][1]:.2f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
