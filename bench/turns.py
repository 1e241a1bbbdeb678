"""Turn benchmark: what a statecore turn costs next to a bare Temporal Update.

    .venv/bin/python -m bench.turns --out bench/results/turns_run1.json   # full run, ~10 min
    .venv/bin/python -m bench.turns --quick   # smoke test, ~1 min; never a result
    .venv/bin/python -m bench.turns --long    # the long session alone (10,000 turns)

Everything runs against ONE embedded dev server (SQLite-file backed, no dynamic config
changed unless ``--server-config`` says so) with the worker in this process. The scenarios
take turns in many short rounds, in a shuffled order, so a noisy machine slows them alike;
every ratio is taken within a round.
See bench/README.md for what is measured and how.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from sqlalchemy.engine import make_url
from temporalio.client import Client
from temporalio.worker import Worker

from bench.harness.environment import machine_info, server_facts
from bench.harness.floor import FloorSession, noop
from bench.harness.long_session import run_long_session
from bench.harness.measure import (
    Samples,
    Scenario,
    agent_scenario,
    concurrent,
    floor_scenario,
    sequential,
    shuffled_rounds,
)
from bench.harness.process_cpu import CpuMeter
from bench.harness.state_turns import STATE_WORKFLOW, StateSession
from bench.harness.turn_report import (
    CONTRACT_FLOOR,
    FLOOR,
    LOCAL_FLOOR,
    phase_report,
    target_report,
)
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import start_dev_server
from statecore.temporal._plugin import StatecorePlugin
from tests.dbs import create_database, drop_database, server_down_reason

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
#: A smoke run's default file; .gitignore keeps ``*-quick.*`` out of the repository.
SMOKE_OUT = RESULTS / "turns-quick.json"


@dataclass
class Settings:
    mode: str
    #: A smoke test: too few rounds for its numbers to mean anything.
    smoke: bool
    rounds: int
    turns_per_round: int
    concurrent_rounds: int
    sessions: int
    session_turns_per_round: int
    warmup_turns: int
    seed: int
    #: 1 session: each turn waits a random 0 to pause_ms milliseconds first (0: back to back).
    pause_ms: float
    #: 0: no long session.
    long_turns: int
    long_turns_per_run: int | None
    long_max_minutes: float
    out: Path
    #: Dynamic config values the dev server starts with (``--server-config``); none by default.
    server_config: dict[str, str] = field(default_factory=dict)
    #: Print these settings and run nothing (``--settings-only``).
    settings_only: bool = False


def parse_args(argv: list[str] | None = None) -> Settings:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke test: few short rounds, 5 sessions")
    p.add_argument(
        "--long", action="store_true", help="only the long session (default 10,000 turns)"
    )
    p.add_argument("--out", type=Path, help="JSON path (the PNG goes next to it)")
    p.add_argument("--rounds", type=int, help="1-session rounds (full: 40)")
    p.add_argument("--turns", type=int, help="1-session turns per scenario per round (full: 16)")
    p.add_argument("--concurrent-rounds", type=int, help="concurrent rounds (full: 20)")
    p.add_argument("--sessions", type=int, help="concurrent sessions (full: 50)")
    p.add_argument(
        "--session-turns", type=int, help="turns per concurrent session per round (full: 2)"
    )
    p.add_argument("--seed", type=int, default=14, help="seed of the rounds' order")
    p.add_argument(
        "--pause-ms",
        type=float,
        default=50.0,
        help="1 session: a uniform random pause of 0 to this many ms before each turn, so turns\n"
        "do not fall into step with the server's 50 ms transfer-queue reads (0: none)",
    )
    p.add_argument("--long-turns", type=int, help="turns of the long session")
    p.add_argument(
        "--long-max-minutes",
        type=float,
        default=40.0,
        help="stop the long session after this long and report what it reached",
    )
    p.add_argument(
        "--server-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a dynamic config value for the dev server (repeatable); the results record it",
    )
    p.add_argument(
        "--settings-only",
        action="store_true",
        help="print the settings the run would use, as JSON, and exit without running",
    )
    a = p.parse_args(argv)
    server_config: dict[str, str] = {}
    for item in a.server_config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            p.error(f"--server-config takes KEY=VALUE, got {item!r}")
        server_config[key.strip()] = value.strip()
    if a.quick and a.long:
        p.error("--quick and --long are separate runs")
    quick = a.quick
    if a.long:
        mode, default_out = "long", RESULTS / "turns_long.json"
    else:
        mode, default_out = ("quick", SMOKE_OUT) if quick else ("full", RESULTS / "turns_run.json")
    out = a.out or default_out
    if quick and out.resolve().parent == RESULTS.resolve() and "-quick" not in out.name:
        p.error(f"a smoke run is never a result: write it to {SMOKE_OUT.name} or elsewhere")
    settings = Settings(
        mode=mode,
        smoke=quick,
        rounds=a.rounds or (3 if quick else 40),
        turns_per_round=a.turns or (4 if quick else 16),
        concurrent_rounds=a.concurrent_rounds or (3 if quick else 20),
        sessions=a.sessions or (5 if quick else 50),
        session_turns_per_round=a.session_turns or 2,
        warmup_turns=2 if quick else 10,
        seed=a.seed,
        pause_ms=a.pause_ms,
        # The smoke test runs a short long session too, so that code is exercised.
        long_turns=a.long_turns or (60 if quick else 10_000 if a.long else 0),
        # Quick mode moves runs often so the multi-run accounting is exercised too.
        long_turns_per_run=25 if quick else None,
        long_max_minutes=a.long_max_minutes,
        out=out,
        server_config=server_config,
        settings_only=a.settings_only,
    )
    if not 0 <= a.pause_ms <= 10_000:
        p.error("--pause-ms takes 0 to 10000")
    if min(settings.rounds, settings.concurrent_rounds) < 2 and mode != "long":
        p.error("an interval needs at least two rounds")
    return settings


async def start_worker(
    stack: AsyncExitStack, address: str, url: str, **plugin_kwargs: Any
) -> tuple[Client, AgentSessionClient]:
    """A worker in this process on a fresh task queue, stopped when ``stack`` closes."""
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    plugin = StatecorePlugin(url, **plugin_kwargs)
    client = await Client.connect(address, plugins=[plugin])
    await stack.enter_async_context(Worker(client, task_queue=queue))
    return client, AgentSessionClient(client, task_queue=queue)


@dataclass
class Bench:
    """What the phases share: the scenarios, the SQLite session client, the CPU meter."""

    client: Client
    sqlite_sessions: AgentSessionClient
    agent_id: str
    scenarios: list[Scenario]
    skipped: dict[str, str]
    meter: CpuMeter
    #: The 1-minute load average at the end of every round: what else the machine was doing.
    load: list[float] = field(default_factory=list)


async def set_up(stack: AsyncExitStack, address: str, tmp: Path, meter: CpuMeter) -> Bench:
    """Workers for SQLite (with the floor workflow) and PostgreSQL, and the scenarios."""
    sqlite_url = f"sqlite+aiosqlite:///{tmp / 'statecore.db'}"
    client, sqlite_sessions = await start_worker(
        stack,
        address,
        sqlite_url,
        extra_workflows=[FloorSession, StateSession],
        extra_activities=[noop],
    )
    queue = sqlite_sessions.task_queue
    # Workflow ids are global on the server: each store gets its own agent id, so a session
    # of one scenario is never the same workflow as another's (which would run on the other
    # worker's task queue and measure the wrong store).
    run = uuid.uuid4().hex[:6]
    agent = f"bench-{run}-sqlite"
    scenarios = [
        floor_scenario(FLOOR, "Update + one no-op regular activity", client, queue, "turn"),
        floor_scenario(
            CONTRACT_FLOOR,
            "Update + one no-op regular activity + one search-attribute upsert (StatecoreTurn)",
            client,
            queue,
            "turn_upsert",
        ),
        floor_scenario(
            LOCAL_FLOOR, "Update + one no-op local activity", client, queue, "turn_local"
        ),
        floor_scenario(
            "state_sqlite",
            "turn API, no model: turn.commit() of one KV put and one message (one local "
            "activity), SQLite",
            client,
            queue,
            "turn",
            workflow_type=STATE_WORKFLOW,
        ),
        floor_scenario(
            "state_reads_sqlite",
            "state_sqlite plus a KV read and a scoped-state read in the turn (three local "
            "activities), SQLite",
            client,
            queue,
            "turn_reads",
            workflow_type=STATE_WORKFLOW,
        ),
        agent_scenario(
            "agent_sqlite", "AgentSession turn, offline model, SQLite file", sqlite_sessions, agent
        ),
    ]
    skipped: dict[str, str] = {}
    reason = await server_down_reason("postgresql")
    if reason is None:
        pg_url = await create_database("postgresql", "bench")
        stack.push_async_callback(drop_database, pg_url)
        meter.attach_postgres(str(make_url(pg_url).database))
        _, pg_sessions = await start_worker(stack, address, pg_url)
        scenarios.append(
            agent_scenario(
                "agent_postgresql",
                "AgentSession turn, offline model, PostgreSQL (fresh database)",
                pg_sessions,
                f"bench-{run}-postgresql",
            )
        )
    else:
        skipped["agent_postgresql"] = reason
        print(f"SKIPPED agent_postgresql: {reason}", flush=True)
    return Bench(client, sqlite_sessions, agent, scenarios, skipped, meter)


def _progress(b: Bench, label: str, r: int, rounds: int, done: dict[str, list[Samples]]) -> None:
    b.load.append(os.getloadavg()[0])
    means = " ".join(
        f"{name}={statistics.fmean(s[-1].latencies) * 1000:.0f}" for name, s in done.items()
    )
    print(f"  {label}: round {r + 1}/{rounds} (load {b.load[-1]:.1f}) mean ms: {means}", flush=True)


async def single_session(b: Bench, s: Settings) -> dict[str, list[Samples]]:
    """One session per scenario, sequential turns, many short rounds in a shuffled order."""
    rounds: dict[str, list[Samples]] = {sc.name: [] for sc in b.scenarios}
    session = f"single-{uuid.uuid4().hex[:8]}"
    for sc in b.scenarios:  # opens the session; warms caches
        await sequential(sc, session, 0, s.warmup_turns, Samples())
        await sc.check_placement(b.client, session)
    # Seeded, so a run can be repeated; every scenario draws from the same distribution.
    pauses = random.Random(s.seed + 2)

    def pause() -> float:
        return pauses.uniform(0.0, s.pause_ms / 1000)

    for r, order in enumerate(shuffled_rounds(b.scenarios, s.rounds, s.seed)):
        for sc in order:
            first = s.warmup_turns + r * s.turns_per_round
            into = Samples()
            await sequential(
                sc, session, first, s.turns_per_round, into, b.meter, pause if s.pause_ms else None
            )
            rounds[sc.name].append(into)
        _progress(b, "1 session", r, s.rounds, rounds)
    return rounds


async def many_sessions(b: Bench, s: Settings) -> dict[str, list[Samples]]:
    """``s.sessions`` sessions per scenario at once, each taking sequential turns."""
    rounds: dict[str, list[Samples]] = {sc.name: [] for sc in b.scenarios}
    ids = [f"many-{uuid.uuid4().hex[:8]}-{i}" for i in range(s.sessions)]
    for sc in b.scenarios:
        await concurrent(sc, ids, 0, 1, Samples())  # opens every session
        await sc.check_placement(b.client, ids[0])
    orders = shuffled_rounds(b.scenarios, s.concurrent_rounds, s.seed + 1)
    for r, order in enumerate(orders):
        for sc in order:
            first = 1 + r * s.session_turns_per_round
            into = Samples()
            await concurrent(sc, ids, first, s.session_turns_per_round, into, b.meter)
            rounds[sc.name].append(into)
        _progress(b, f"{s.sessions} sessions", r, s.concurrent_rounds, rounds)
    return rounds


async def long_session(b: Bench, s: Settings) -> tuple[dict[str, Any], dict[str, Any]]:
    options: dict[str, Any] = {}
    if s.long_turns_per_run:
        options["max_turns_per_run"] = s.long_turns_per_run
    scenario = agent_scenario(
        "agent_sqlite", "long session", b.sqlite_sessions, b.agent_id, **options
    )
    session = f"long-{uuid.uuid4().hex[:8]}"
    block, series = await run_long_session(
        b.client,
        scenario,
        session,
        s.long_turns,
        max_minutes=s.long_max_minutes,
        meter=b.meter,
        control=b.scenarios[0],
    )
    block["max_turns_per_run"] = s.long_turns_per_run or "default (1000)"
    report = await b.sqlite_sessions.describe(b.agent_id, session)
    block["final_checkpoint"] = report.checkpoint.model_dump(
        include={"turn", "runs", "compactions", "message_count", "token_total", "window_tokens"}
    )
    return block, series


METHOD = {
    "order": "scenarios shuffled within each round by a seeded generator",
    "latency_interval": "Student's t over the rounds' mean latencies, 95%",
    "ratio": "per round: scenario's mean (or CPU per turn) / its floor's; summarised as the "
    "geometric mean of the rounds' ratios with a 95% Student's t interval on their logs",
    "cpu": "CPU seconds per turn: worker = the benchmark process (client and worker run in "
    "it), temporal_server = the dev server process, postgresql = the backends of the "
    "benchmark's database (process title), all from /proc",
    "percentiles": "over all measured turns pooled, linear interpolation between ranks",
    "pause": "1 session: before each measured turn a uniform random pause of 0 to pause_ms "
    "(settings), left out of its latency and of the block's wall time; its CPU is in the block",
}


async def run(s: Settings) -> dict[str, Any]:
    started = time.time()
    machine = machine_info()
    result: dict[str, Any] = {}
    series: dict[str, Any] = {}
    with TemporaryDirectory(prefix="statecore-bench-") as tmp_name:
        tmp = Path(tmp_name)
        server = await start_dev_server(
            db_filename=str(tmp / "temporal.db"),
            log_path=str(tmp / "server.log"),
            dynamic_config=s.server_config,
        )
        try:
            facts = await server_facts(server, overrides=s.server_config)
            print_facts(facts)
            meter = CpuMeter(server.process.pid if server.process else None)
            async with AsyncExitStack() as stack:
                b = await set_up(stack, server.address, tmp, meter)
                if s.mode != "long":
                    print(
                        f"1 session: {s.rounds} rounds x {s.turns_per_round} turns per scenario",
                        flush=True,
                    )
                    single = await single_session(b, s)
                    result["single_session"] = phase_report(single, b.skipped, 1)
                    print(
                        f"{s.sessions} concurrent sessions: {s.concurrent_rounds} rounds x "
                        f"{s.session_turns_per_round} turns per session",
                        flush=True,
                    )
                    many = await many_sessions(b, s)
                    result["concurrent"] = phase_report(many, b.skipped, s.sessions)
                    result["targets"] = target_report(result)
                if s.long_turns:
                    print(f"long session: {s.long_turns} turns on SQLite", flush=True)
                    result["long_session"], series = await long_session(b, s)
        finally:
            server.stop()
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    if b.load:
        machine["loadavg_1min_at_round_ends"] = {
            "min": round(min(b.load), 2),
            "mean": round(statistics.fmean(b.load), 2),
            "max": round(max(b.load), 2),
            "rounds": len(b.load),
        }
    return {
        "benchmark": "turns",
        "mode": s.mode,
        "smoke": s.smoke,
        "command": " ".join([".venv/bin/python -m bench.turns", *sys.argv[1:]]),
        "machine": machine,
        "server": facts,
        "settings": {
            k: str(v) if isinstance(v, Path) else v
            for k, v in asdict(s).items()
            if k != "settings_only"
        },
        "method": METHOD,
        "scenarios": {sc.name: sc.description for sc in b.scenarios},
        **result,
        "elapsed_seconds": round(time.time() - started, 1),
        "_series": series,
    }


def print_facts(facts: dict[str, Any]) -> None:
    overrides = facts["dynamic_config_overrides"]
    print("Temporal server facts (defaults unless marked):")
    for key, value in facts["dynamic_config_defaults"].items():
        print(f"  {key} = {overrides.get(key, value)}{' (set)' if key in overrides else ''}")
    for key, value in overrides.items():
        if key not in facts["dynamic_config_defaults"]:
            print(f"  {key} = {value} (set)")
    print(f"  server {facts['server_version']}; {facts['cli_version']}", flush=True)


def _ci(block: dict[str, Any], digits: int = 1) -> str:
    low, high = block["ci95"]
    return f"{block['value']:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def print_phases(result: dict[str, Any]) -> None:
    for phase in ("single_session", "concurrent"):
        block = result[phase]
        print(f"\n{phase} ({block['sessions']} session(s))")
        print(
            f"  {'scenario':22} {'mean ms [95% CI]':>24} {'p50':>7} {'p90':>7} {'p99':>7} "
            f"{'CPU ms/turn [95% CI]':>22} {'worker':>7} {'server':>7} {'pg':>6}"
        )
        for name, st in block["scenarios"].items():
            if "skipped" in st:
                print(f"  {name:22} skipped: {st['skipped']}")
                continue
            cpu = st["cpu_ms_per_turn"]
            print(
                f"  {name:22} {_ci(st['mean_ms']):>24} {st['p50_ms']:7.1f} {st['p90_ms']:7.1f} "
                f"{st['p99_ms']:7.1f} {_ci(cpu['total']):>22} {cpu['worker']:7.1f} "
                f"{cpu['temporal_server']:7.1f} {cpu['postgresql']:6.1f}"
            )
        print(f"  {'ratio':45} {'latency mean [95% CI]':>24} {'CPU/turn [95% CI]':>24}")
        for key, ratio in block["ratios"].items():
            print(
                f"  {key:45} {_ci(ratio['latency_mean'], 3):>24} "
                f"{_ci(ratio['cpu_per_turn'], 3):>24}"
            )
    print("\ntargets (ratio of mean latency to the floor):")
    for t in result["targets"]:
        ratio = t.get("latency_mean_ratio")
        shown = _ci(ratio, 3) if ratio else "-"
        print(
            f"  {t['phase']:15} {t['scenario']:18} / {t['floor']:21} <= {t['target']}: "
            f"{shown}: {t['status']}"
        )


def print_long(long: dict[str, Any]) -> None:
    print(
        f"\nlong session: {long['completed_turns']}/{long['requested_turns']} turns, "
        f"{long['runs']} runs, {long['wall_seconds']:.0f} s"
    )
    first, last = long["first_window"], long["last_window"]
    for window in (first, last):
        print(
            f"  turns {window['turns']}: p50 {window['p50_ms']} ms, "
            f"{window['history_bytes_p50']} history bytes/turn (median)"
        )
    print(
        f"  load control (floor p50, same windows): {first['floor_p50_ms']} ms -> "
        f"{last['floor_p50_ms']} ms; agent/floor {first['p50_ratio_to_floor']} -> "
        f"{last['p50_ratio_to_floor']}"
    )
    print(
        f"  change: latency {long['change_pct']['p50_latency']}%, "
        f"latency relative to the floor {long['change_pct']['p50_ratio_to_floor']}%, "
        f"history bytes {long['change_pct']['history_bytes_p50']}% (target within "
        f"{long['target_change_pct']}%)"
    )


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    if settings.settings_only:
        print(json.dumps({**asdict(settings), "out": str(settings.out)}, indent=2))
        return 0
    result = asyncio.run(run(settings))
    series = result.pop("_series")
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text(json.dumps(result, indent=2) + "\n")
    png = settings.out.with_suffix(".png")
    from bench.harness.plot import plot_turns  # matplotlib: only for a run that draws

    plot_turns(result, png, **series)
    if "single_session" in result:
        print_phases(result)
    if "long_session" in result:
        print_long(result["long_session"])
    if settings.smoke:
        print("\nSMOKE TEST: too few rounds to mean anything; never quote these numbers.")
    print(f"\nwrote {settings.out} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
