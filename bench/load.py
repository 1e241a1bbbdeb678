"""Load: many concurrent sessions against ONE worker process on PostgreSQL.

    .venv/bin/python -m bench.load            # 200 sessions x 10 turns: bench/results/load.json
    .venv/bin/python -m bench.load --quick    # 20 sessions x 3 turns, well under a minute

The worker is ``python worker.py`` in its own process, the way a deployment runs it, against
a fresh PostgreSQL database and a Temporal dev server (SQLite file). This process drives every
session with ``AgentSessionClient.send``: each session sends its turns one after another, all
sessions at once. Every exception a client sees is counted (the client's own retries of
transient refusals are the only retries). Afterwards the database is read back: every turn
stored exactly once, seqs contiguous per session. Reported: turns per second, latency
percentiles, the worker's peak memory (VmHWM) and CPU, and its failure counters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.harness.environment import machine_info, server_facts
from bench.harness.load_checks import (
    check_sql,
    history_retries,
    scrape,
    summarize_worker_log,
    worker_counters,
)
from bench.harness.load_probes import SAMPLE_EVERY_SECONDS, CpuReading, Watch, proc_status_kib
from bench.harness.measure import CONTENT, percentile
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import DevServer, free_port, start_dev_server
from tests.dbs import create_database, drop_database, server_down_reason
from tests.worker_cli import base_env, log_tail, worker_cli

ROOT = Path(__file__).resolve().parents[1]
TASK_QUEUE = "load"
AGENT = "load-agent"


@dataclass
class Settings:
    mode: str
    sessions: int
    turns: int
    out: Path


@dataclass
class Drive:
    """What the clients saw."""

    latencies: list[float] = field(default_factory=list)
    first_turn_latencies: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0
    errors: list[dict[str, Any]] = field(default_factory=list)
    #: session id -> the turn numbers its replies carried, in the order sent
    turn_numbers: dict[str, list[int]] = field(default_factory=dict)
    #: time.perf_counter() of each answered turn, for the throughput-over-time figure
    completed_at: list[float] = field(default_factory=list)


def parse_args(argv: list[str] | None = None) -> Settings:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="smoke run: 20 sessions x 3 turns")
    p.add_argument("--sessions", type=int, help="concurrent sessions (full: 200)")
    p.add_argument("--turns", type=int, help="sequential turns per session (full: 10)")
    p.add_argument("--out", type=Path, help="result JSON (default bench/results/load.json)")
    a = p.parse_args(argv)
    results = ROOT / "bench" / "results"
    return Settings(
        mode="quick" if a.quick else "full",
        sessions=a.sessions or (20 if a.quick else 200),
        turns=a.turns or (3 if a.quick else 10),
        out=a.out or results / ("load-quick.json" if a.quick else "load.json"),
    )


async def drive(sessions: AgentSessionClient, s: Settings) -> Drive:
    """All sessions at once, each sending its turns in order. A failed turn is recorded and
    the session goes on with its next turn (the SQL check then shows what is missing)."""
    d = Drive()

    async def one(session_id: str) -> None:
        numbers = d.turn_numbers.setdefault(session_id, [])
        for i in range(s.turns):
            turn_id = f"{session_id}-t{i}"
            start = time.perf_counter()
            try:
                result = await sessions.send(
                    AGENT, session_id, CONTENT.format(n=i), turn_id=turn_id
                )
            except Exception as exc:  # every error a client sees is a finding, never retried
                d.errors.append(
                    {
                        "session": session_id,
                        "turn_id": turn_id,
                        "type": type(exc).__name__,
                        "message": str(exc)[:500],
                        "seconds": round(time.perf_counter() - start, 3),
                    }
                )
                continue
            elapsed = time.perf_counter() - start
            d.completed_at.append(time.perf_counter())
            (d.first_turn_latencies if i == 0 else d.latencies).append(elapsed)
            numbers.append(result.turn)

    started = time.perf_counter()
    await asyncio.gather(*(one(session_id(n)) for n in range(s.sessions)))
    d.wall_seconds = time.perf_counter() - started
    return d


def session_id(n: int) -> str:
    return f"s{n:04d}"


async def run(s: Settings, tmp: Path) -> dict[str, Any]:
    machine = machine_info()
    url = await create_database("postgresql", "load")
    server: DevServer | None = None
    try:
        server = await start_dev_server(
            db_filename=str(tmp / "temporal.db"), log_path=str(tmp / "temporal.log")
        )
        facts = await server_facts(server)
        metrics_port = free_port()
        args = ["--address", server.address, "--database-url", url, "--task-queue", TASK_QUEUE]
        args += ["--metrics-port", str(metrics_port), "--log-format", "json"]
        log = tmp / "worker.log"
        async with worker_cli(args, base_env(), log) as worker:
            report = await measure(s, server, worker.pid, metrics_port, url)
            if worker.poll() is not None:
                report["problems"].append(f"worker exited with {worker.returncode}")
        report["worker_log"] = summarize_worker_log(log)
        if report["problems"] or not report["ok"]:
            report["worker_log"]["tail"] = log_tail(log, 40).splitlines()
        report["sql"] = asdict(sql := await check_sql(url, AGENT, expected_turns(s)))
        report["ok"] = report["ok"] and sql.ok and not report["problems"]
    finally:
        if server is not None:
            server.stop()
        await drop_database(url)
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return {
        "benchmark": "load",
        "mode": s.mode,
        "command": " ".join([".venv/bin/python -m bench.load", *sys.argv[1:]]),
        "machine": machine,
        "server": facts,
        "worker": {
            "command": "python worker.py --address ADDRESS --database-url POSTGRESQL_URL "
            f"--task-queue {TASK_QUEUE} --metrics-port PORT --log-format json",
            "database": "PostgreSQL 127.0.0.1:5432, a fresh database dropped afterwards",
            "settings": "worker.py defaults (SDK slot and pool defaults, offline model)",
        },
        "settings": {"sessions": s.sessions, "turns_per_session": s.turns},
        **report,
    }


async def measure(
    s: Settings, server: DevServer, pid: int, metrics_port: int, url: str
) -> dict[str, Any]:
    """Drive the sessions while watching the worker; what the clients and the worker show."""
    client = await Client.connect(server.address, data_converter=pydantic_data_converter)
    sessions = AgentSessionClient(client, task_queue=TASK_QUEUE)
    server_pid = server.process.pid if server.process else None
    idle_rss = proc_status_kib(pid, "VmRSS")
    watch = Watch(pid, url)
    watching = asyncio.ensure_future(watch.run())
    cpu0, bench0 = CpuReading.now(pid, server_pid), time.process_time()
    d = await drive(sessions, s)
    cpu1, bench1 = CpuReading.now(pid, server_pid), time.process_time()
    watch.stop()
    await watching
    peak_kib = proc_status_kib(pid, "VmHWM")
    counters = worker_counters(await asyncio.to_thread(scrape, metrics_port))
    retries = await history_retries(
        client, [sessions.workflow_id(AGENT, session_id(n)) for n in range(s.sessions)]
    )

    planned = s.sessions * s.turns
    answered = len(d.latencies) + len(d.first_turn_latencies)
    problems = [
        f"{sid}: replies carried turns {nums}, not 1..{s.turns}"
        for sid, nums in d.turn_numbers.items()
        if nums != list(range(1, s.turns + 1))
    ]
    failures = sum(f["total"] for f in counters["failures"].values())
    cpu = cpu1.since(cpu0, d.wall_seconds, answered)
    cpu["bench_process_clients"] = {
        "cpu_ms_per_turn": round((bench1 - bench0) * 1000 / answered, 2) if answered else 0.0
    }
    return {
        "ok": not d.errors
        and answered == planned
        and failures == 0
        and counters["statecore_turns"] == planned,
        "turns_planned": planned,
        "turns_answered": answered,
        "client_errors": len(d.errors),
        "client_error_samples": d.errors[:20],
        "wall_seconds": round(d.wall_seconds, 2),
        "turns_per_second": round(answered / d.wall_seconds, 2) if d.wall_seconds else 0.0,
        "latency_all_turns": latency_summary(d.first_turn_latencies + d.latencies),
        # The first turn of a session also starts its workflow (update-with-start).
        "latency_first_turn": latency_summary(d.first_turn_latencies),
        "latency_later_turns": latency_summary(d.latencies),
        "worker_memory": {
            # The kernel refreshes VmHWM lazily (on unmaps), so a sampled VmRSS can pass it.
            "peak_rss_mib": round(max([peak_kib, *watch.rss_kib]) / 1024, 1),
            "peak_source": "the larger of VmHWM at the end and every sampled VmRSS "
            f"(/proc/{pid}/status)",
            "vmhwm_mib": round(peak_kib / 1024, 1),
            "idle_rss_mib_before_load": round(idle_rss / 1024, 1),
            "max_sampled_rss_mib": round(max(watch.rss_kib, default=idle_rss) / 1024, 1),
            "rss_samples": len(watch.rss_kib),
            "sample_every_seconds": SAMPLE_EVERY_SECONDS,
        },
        # Seconds since the first memory sample (taken just before the load starts).
        "timeline": {
            "turn_completed_seconds": [round(t - watch.rss_at[0], 2) for t in d.completed_at]
            if watch.rss_at
            else [],
            "worker_rss_mib": [
                [round(t - watch.rss_at[0], 2), round(kib / 1024, 1)]
                for t, kib in zip(watch.rss_at, watch.rss_kib, strict=True)
            ],
        },
        "cpu": cpu,
        "worker_database_connections": watch.connection_report(),
        "worker_metrics": counters,
        # Work the server or worker redid without the client noticing (retried, not lost).
        "history_retries": retries,
        "problems": problems,
    }


def latency_summary(seconds: list[float]) -> dict[str, float | int]:
    """Percentiles interpolate linearly between ranks (numpy's default), in milliseconds."""
    if not seconds:
        return {"turns": 0}
    ms = [x * 1000 for x in seconds]
    out: dict[str, float | int] = {"turns": len(ms)}
    for pct in (50, 90, 95, 99):
        out[f"p{pct}_ms"] = round(percentile(ms, pct), 1)
    out.update(
        mean_ms=round(sum(ms) / len(ms), 1), min_ms=round(min(ms), 1), max_ms=round(max(ms), 1)
    )
    return out


def expected_turns(s: Settings) -> dict[str, list[str]]:
    return {
        session_id(n): [f"{session_id(n)}-t{i}" for i in range(s.turns)] for n in range(s.sessions)
    }


def print_summary(r: dict[str, Any]) -> None:
    lat, sql, mem = r["latency_all_turns"], r["sql"], r["worker_memory"]
    print(
        f"load: {r['settings']['sessions']} sessions x {r['settings']['turns_per_session']} "
        f"turns, one worker process, PostgreSQL: {r['turns_answered']}/{r['turns_planned']} "
        f"turns answered, {r['client_errors']} client errors, {r['wall_seconds']} s"
    )
    if lat["turns"]:
        print(
            f"  {r['turns_per_second']} turns/s; latency p50 {lat['p50_ms']} ms, "
            f"p95 {lat['p95_ms']} ms, p99 {lat['p99_ms']} ms, max {lat['max_ms']} ms"
        )
    cpu = r["cpu"]
    print(
        f"  worker peak RSS {mem['peak_rss_mib']} MiB (idle {mem['idle_rss_mib_before_load']} "
        f"MiB); worker CPU {cpu['worker']}; dev server CPU {cpu['dev_server']}; machine CPU "
        f"pressure {cpu.get('machine_cpu_pressure_some_pct')}%"
    )
    print(f"  worker database connections: {r['worker_database_connections']}")
    retries = r["history_retries"]
    print(
        f"  retries in history: {retries['events']}; workflow task timeouts by type "
        f"{retries['workflow_task_timeouts_by_type']}"
    )
    failures = {k: v["total"] for k, v in r["worker_metrics"]["failures"].items()}
    print(f"  worker failure counters: {failures}")
    print(f"  worker log records: {r['worker_log']['records_by_level']}")
    for entry in r["worker_log"]["warnings_and_errors"][:10]:
        print(f"  worker log: {entry['count']} x {entry['line']}")
    print(
        f"  SQL: {sql['sessions_found']}/{sql['sessions_expected']} sessions, "
        f"{sql['messages_found']}/{sql['messages_expected']} messages; missing "
        f"{sql['missing_turns']}, duplicated {sql['duplicated_turns']}, gaps "
        f"{sql['sessions_with_gaps']}, out of order {sql['sessions_out_of_order']}, "
        f"counter mismatches {sql['counter_mismatches']}"
    )
    for line in (sql["problems"] + r["problems"])[:20]:
        print("  problem:", line)
    for err in r["client_error_samples"][:10]:
        print("  client error:", err)
    print("  ok" if r["ok"] else "  NOT OK")


def main(argv: list[str] | None = None) -> int:
    s = parse_args(argv)
    reason = asyncio.run(server_down_reason("postgresql"))
    if reason:
        print(f"load: cannot run: {reason}")
        return 2
    with tempfile.TemporaryDirectory(prefix="statecore-load-") as tmp:
        result = asyncio.run(run(s, Path(tmp)))
    s.out.parent.mkdir(parents=True, exist_ok=True)
    s.out.write_text(json.dumps(result, indent=2) + "\n")
    from bench.harness.plot import plot_load_timeline

    plot_load_timeline(result, s.out.with_name(s.out.stem + "-timeline.png"))
    print_summary(result)
    print(f"wrote {s.out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
