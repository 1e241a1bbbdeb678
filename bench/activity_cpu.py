"""statecore's own CPU per chat turn: the ``generate`` activity alone, without Temporal.

    .venv/bin/python -m bench.activity_cpu --before 2c8aef7             # SQLite
    .venv/bin/python -m bench.activity_cpu --before 2c8aef7 --db postgresql
    .venv/bin/python -m bench.activity_cpu --before 2c8aef7 --rounds 2 --turns 30   # smoke
    .venv/bin/python -m bench.activity_cpu --before 2c8aef7 --turn state   # commit_turn alone
    .venv/bin/python -m bench.activity_cpu --before 2c8aef7 --log-messages 20000   # a long log

The worker's CPU per turn (bench/cpu_per_turn.py) is mostly Temporal's own machinery, which
hides statecore's share in its noise. Here each run is a fresh process that drives the turn
activity as an AgentSession turn does (``generate`` with a commit: context read, offline
model, commit of the user message, reply and turn record) through temporalio's
``ActivityEnvironment``, on a fresh database and one session: warm-up turns, then
``--turns`` measured turns. Its CPU time (``time.process_time``: every thread, the SQLite
connection's included) divided by the turns is one value; beside it, the wall time per turn
and, on PostgreSQL, the CPU per turn of the database's backends (``bench/harness/process_cpu.py``'s
``PostgresBackends``), the WAL bytes the server wrote per turn and the size of the session
headers' table with its indexes after the run (no vacuum runs meanwhile), each with its own
paired difference. The SQL statements per turn are
counted over 20 more turns afterwards, since listening to statements would send each through
SQLAlchemy's execution instead of the direct path a worker takes. ``--turn state`` drives
the state-only turn's activity instead (bench/harness/state_turns.py): ``commit_turn`` of one
message and one KV put, no model call. The two versions alternate round by round (A B,
B A, ...); the result has each version's mean with a 95% interval and the paired
difference. Writes ``bench/results/activity_cpu_<db>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.cpu_per_turn import summary
from bench.harness.environment import machine_info
from bench.harness.worker_process import exported_versions, round_order

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

# One measured run, in a fresh interpreter started in ``code``, so that ``python -c`` finds
# that checkout's statecore first. Prints JSON.
_CHILD = r"""
import asyncio, importlib.util, json, os, sys, time
code, url, warmup, turns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
kind, log_messages = sys.argv[5], int(sys.argv[7])
# bench/harness/process_cpu.py of this checkout, loaded by its path: ``code`` may be another
# checkout, whose bench/ is not this one.
spec = importlib.util.spec_from_file_location("process_cpu", sys.argv[6])
process_cpu = sys.modules["process_cpu"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(process_cpu)
import statecore
assert statecore.__file__.startswith(code), statecore.__file__
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from temporalio.testing import ActivityEnvironment
from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import CommitTurnInput, GenerateInput, KVOp
from statecore.core._models import Message, SessionRef
from statecore.llm._offline import OfflineModel
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore

CONTENT = "turn {n}: please look at what we have so far and suggest the next step."
REF = SessionRef(namespace="default", agent_id="bench", session_id="activity-cpu")
DATABASE = make_url(url).database if url.startswith("postgresql") else None
BACKENDS = process_cpu.PostgresBackends(DATABASE) if DATABASE else None

async def server_number(store, query):
    # One number from PostgreSQL (0 on SQLite): "wal", the bytes of WAL the server has
    # written so far (the whole server's; nothing else runs), or "headers", the session
    # headers' table with its indexes (no vacuum runs meanwhile).
    if DATABASE is None:
        return 0
    sql = {
        "wal": "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')",
        "headers": "SELECT pg_total_relation_size('statecore_sessions')",
    }[query]
    async with store.engine.connect() as conn:
        return int((await conn.execute(text(sql))).scalar_one())

def server_cpu():
    # CPU seconds of the PostgreSQL backends serving this database, since the first reading
    # (bench/harness/process_cpu.py, in nanoseconds); 0 on SQLite.
    return BACKENDS.cpu_seconds() if BACKENDS is not None else 0.0

async def main():
    await upgrade_database(url)
    store = await SqlStateStore.connect(url)
    statements = [0]
    def count(*_args):
        statements[0] += 1
    resources = WorkerResources(models={"default": OfflineModel()})
    resources.attach(store)
    activities, env = TurnActivities(resources), ActivityEnvironment()
    if log_messages:
        # A long log before the first turn, appended 1,000 messages at a time: what a turn
        # costs deep into a session, without running every turn that would lead there.
        for first in range(0, log_messages, 1000):
            size = min(1000, log_messages - first)
            earlier = [Message(role="user", content=CONTENT.format(n=-i)) for i in range(size)]
            async with store.transaction() as tx:
                await tx.sessions.ensure(REF)
                await tx.conversation.append(REF, f"earlier-{first}", earlier)
    async def turn(n):
        turn_id = f"turn-{n:06d}"
        user = Message(role="user", content=CONTENT.format(n=n))
        if kind == "state":
            put = KVOp(op="put", bucket="notes", key="last", value={"turn": n})
            commit = CommitTurnInput(ref=REF, turn_id=turn_id, turn=n, messages=[user], kv=[put])
            await env.run(activities.commit_turn, commit)
            return
        commit = CommitTurnInput(ref=REF, turn_id=turn_id, turn=n, messages=[user])
        await env.run(activities.generate, GenerateInput(ref=REF, turn_id=turn_id, commit=commit))
    for n in range(1, warmup + 1):
        await turn(n)
    wal = await server_number(store, "wal")
    server = server_cpu()
    cpu, wall = time.process_time(), time.perf_counter()
    for n in range(warmup + 1, warmup + turns + 1):
        await turn(n)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    server = server_cpu() - server
    wal = await server_number(store, "wal") - wal
    header_bytes = await server_number(store, "headers")
    # Statements are counted after the timed turns: a statement listener sends every
    # statement through SQLAlchemy's execution (statecore/store/sql/_prebuilt_statements.py).
    event.listen(store.engine.sync_engine, "before_cursor_execute", count)
    counted = 20
    for n in range(warmup + turns + 1, warmup + turns + counted + 1):
        await turn(n)
    await store.close()
    print(json.dumps({"cpu_ms_per_turn": 1000 * cpu / turns,
                      "wall_ms_per_turn": 1000 * wall / turns,
                      "postgresql_cpu_ms_per_turn": 1000 * server / turns,
                      "wal_bytes_per_turn": wal / turns,
                      "sessions_table_bytes": header_bytes,
                      "statements_per_turn": statements[0] / counted}))

asyncio.run(main())
"""


def one_run(
    code: Path, db: str, warmup: int, turns: int, kind: str, log_messages: int = 0
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="statecore-activity-") as tmp:
        url = asyncio.run(_database(db, Path(tmp)))
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _CHILD,
                    str(code),
                    url,
                    str(warmup),
                    str(turns),
                    kind,
                    str(ROOT / "bench" / "harness" / "process_cpu.py"),
                    str(log_messages),
                ],
                capture_output=True,
                text=True,
                timeout=1800,
                cwd=code,
                env={**os.environ, "PYTHONPATH": ""},
            )
        finally:
            if db != "sqlite":
                asyncio.run(_drop(url))
    if done.returncode != 0:
        raise RuntimeError(f"activity run failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def _database(db: str, tmp: Path) -> str:
    if db == "sqlite":
        return f"sqlite+aiosqlite:///{tmp / 'activity.db'}"
    from tests.dbs import create_database, server_down_reason

    reason = await server_down_reason(db)
    if reason is not None:
        raise SystemExit(f"{db} is not reachable: {reason}")
    return await create_database(db, "activity")


async def _drop(url: str) -> None:
    from tests.dbs import drop_database

    await drop_database(url)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--before", required=True, help="commit of the 'before' statecore")
    p.add_argument("--after", help="commit of the 'after' statecore (default: this tree)")
    p.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--turns", type=int, default=300, help="measured turns per run")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument(
        "--turn",
        choices=("chat", "state"),
        default="chat",
        help="chat: generate with its commit; state: commit_turn of a message and a KV put",
    )
    p.add_argument(
        "--log-messages",
        type=int,
        default=0,
        help="messages already in the session's log before the first turn (default 0)",
    )
    p.add_argument("--out", type=Path, help="default: bench/results/activity_cpu_<db>.json")
    a = p.parse_args(argv)
    if a.rounds < 2:
        p.error("--rounds must be at least 2 for a confidence interval")
    if a.log_messages < 0:
        p.error("--log-messages must be 0 or more")
    load_start = os.getloadavg()[0]
    with exported_versions(a.before, a.after) as versions:
        runs: list[dict[str, dict[str, float]]] = []
        for r in range(a.rounds):
            order = round_order(r)
            got = {
                name: one_run(versions[name], a.db, a.warmup, a.turns, a.turn, a.log_messages)
                for name in order
            }
            runs.append(got)
            print(
                f"round {r + 1}/{a.rounds}: "
                + ", ".join(f"{n} {got[n]['cpu_ms_per_turn']:.2f} ms" for n in order),
                flush=True,
            )
    cpu = {n: [g[n]["cpu_ms_per_turn"] for g in runs] for n in ("before", "after")}

    def paired(what: str) -> dict[str, Any]:
        values = {n: [g[n][what] for g in runs] for n in ("before", "after")}
        return {
            "before": summary(values["before"]),
            "after": summary(values["after"]),
            "after_minus_before": summary(
                [a - b for b, a in zip(values["before"], values["after"], strict=True)]
            ),
        }

    result: dict[str, Any] = {
        "db": a.db,
        "what": (
            "CPU ms per turn of the generate(commit) activity alone (offline model)"
            if a.turn == "chat"
            else "CPU ms per turn of the commit_turn activity alone (one message, one KV put)"
        ),
        "before_revision": a.before,
        "after_revision": a.after or "working tree",
        "rounds": a.rounds,
        "turns_per_run": a.turns,
        "warmup_turns": a.warmup,
        "log_messages_before_first_turn": a.log_messages,
        "before": summary(cpu["before"]),
        "after": summary(cpu["after"]),
        "after_minus_before": summary(
            [after - before for before, after in zip(cpu["before"], cpu["after"], strict=True)]
        ),
        "after_over_before": round(
            statistics.fmean(cpu["after"]) / statistics.fmean(cpu["before"]), 3
        ),
        "wall_ms_per_turn": paired("wall_ms_per_turn"),
        **(
            {
                "postgresql_cpu_ms_per_turn": paired("postgresql_cpu_ms_per_turn"),
                "wal_bytes_per_turn": paired("wal_bytes_per_turn"),
                "sessions_table_bytes": paired("sessions_table_bytes"),
            }
            if a.db == "postgresql"
            else {}
        ),
        "statements_per_turn": {
            n: round(statistics.fmean(g[n]["statements_per_turn"] for g in runs), 2)
            for n in ("before", "after")
        },
        "load_average_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "machine": machine_info(),
    }
    out = a.out or RESULTS / f"activity_cpu_{a.db}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    for key in ("before", "after", "after_minus_before"):
        s = result[key]
        print(f"{key}: {s['mean']:.2f} ms/turn, 95% CI {s['ci95'][0]:.2f} .. {s['ci95'][1]:.2f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
