"""Turn benchmark: what a statecore turn costs next to a bare Temporal Update.

    .venv/bin/python bench/turns.py            # full run (writes bench/results/turns.{json,png})
    .venv/bin/python bench/turns.py --quick    # smoke run, under a minute

Everything runs against ONE embedded dev server (SQLite-file backed, no dynamic config
changed) with the worker in this process, and the scenarios take turns in rotating rounds so
a noisy machine slows them alike. See bench/README.md for what is measured and how.
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
from contextlib import AsyncExitStack  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from tempfile import TemporaryDirectory  # noqa: E402
from typing import Any  # noqa: E402

from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from bench.environment import machine_info, server_facts  # noqa: E402
from bench.floor import FloorSession, noop  # noqa: E402
from bench.long_session import run_long_session  # noqa: E402
from bench.measure import (  # noqa: E402
    CpuMeter,
    Samples,
    Scenario,
    agent_scenario,
    concurrent,
    floor_scenario,
    rotated,
    sequential,
)
from bench.plot import plot_turns  # noqa: E402
from bench.state_turns import STATE_WORKFLOW, StateSession  # noqa: E402
from statecore.temporal.client import AgentSessionClient  # noqa: E402
from statecore.temporal.devserver import start_dev_server  # noqa: E402
from statecore.temporal.plugin import StatecorePlugin  # noqa: E402
from tests.dbs import create_database, drop_database, server_down_reason  # noqa: E402

#: AgentSession p50 may be at most this many times the bare floor's p50.
TARGET_RATIO = 1.25
FLOOR = "floor_activity"
#: The floor plus the one search-attribute upsert the operator contract puts in every turn.
CONTRACT_FLOOR = "floor_activity_upsert"
#: The reference of the state-only turns: an Update running one no-op local activity.
LOCAL_FLOOR = "floor_local_activity"


@dataclass
class Settings:
    mode: str
    rounds: int
    turns_per_round: int
    sessions: int
    session_turns_per_round: int
    warmup_turns: int
    long_turns: int
    long_turns_per_run: int | None
    long_max_minutes: float
    out: Path


def parse_args(argv: list[str] | None = None) -> Settings:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: few turns, 5 sessions")
    p.add_argument("--out", type=Path, help="JSON path (the PNG goes next to it)")
    p.add_argument("--long-turns", type=int, help="turns of the long session (full: 10000)")
    p.add_argument(
        "--long-max-minutes",
        type=float,
        default=40.0,
        help="stop the long session after this long and report what it reached",
    )
    p.add_argument("--rounds", type=int, help="rotating rounds per phase")
    p.add_argument("--turns", type=int, help="1-session turns per scenario per round")
    p.add_argument("--sessions", type=int, help="concurrent sessions (full: 50)")
    a = p.parse_args(argv)
    quick = a.quick
    results = ROOT / "bench" / "results"
    return Settings(
        mode="quick" if quick else "full",
        rounds=a.rounds or (2 if quick else 4),
        turns_per_round=a.turns or (10 if quick else 100),
        sessions=a.sessions or (5 if quick else 50),
        session_turns_per_round=2 if quick else 10,
        warmup_turns=2 if quick else 10,
        long_turns=a.long_turns or (60 if quick else 10_000),
        # Quick mode moves runs often so the multi-run accounting is exercised too.
        long_turns_per_run=25 if quick else None,
        long_max_minutes=a.long_max_minutes,
        out=a.out or results / ("turns-quick.json" if quick else "turns.json"),
    )


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


async def single_session(b: Bench, s: Settings) -> dict[str, Samples]:
    """One session per scenario, sequential turns, scenarios rotating round by round."""
    samples = {sc.name: Samples() for sc in b.scenarios}
    session = f"single-{uuid.uuid4().hex[:8]}"
    for sc in b.scenarios:  # opens the session; warms caches
        await sequential(sc, session, 0, s.warmup_turns, Samples())
        await sc.check_placement(b.client, session)
    for r in range(s.rounds):
        for sc in rotated(b.scenarios, r):
            first = s.warmup_turns + r * s.turns_per_round
            await sequential(sc, session, first, s.turns_per_round, samples[sc.name], b.meter)
        print(f"  1 session: round {r + 1}/{s.rounds} done", flush=True)
    return samples


async def many_sessions(b: Bench, s: Settings) -> dict[str, Samples]:
    """``s.sessions`` sessions per scenario at once, each taking sequential turns."""
    samples = {sc.name: Samples() for sc in b.scenarios}
    ids = [f"many-{uuid.uuid4().hex[:8]}-{i}" for i in range(s.sessions)]
    for sc in b.scenarios:
        await concurrent(sc, ids, 0, 1, Samples())  # opens every session
        await sc.check_placement(b.client, ids[0])
    for r in range(s.rounds):
        for sc in rotated(b.scenarios, r):
            first = 1 + r * s.session_turns_per_round
            await concurrent(sc, ids, first, s.session_turns_per_round, samples[sc.name], b.meter)
        print(f"  {s.sessions} sessions: round {r + 1}/{s.rounds} done", flush=True)
    return samples


def phase_report(
    samples: dict[str, Samples], skipped: dict[str, str], sessions: int
) -> dict[str, Any]:
    stats: dict[str, Any] = {name: smp.summary() for name, smp in samples.items()}
    stats.update({name: {"skipped": reason} for name, reason in skipped.items()})

    def ratios_to(reference: str) -> dict[str, float]:
        base = stats[reference]["p50_ms"]
        return {
            name: round(st["p50_ms"] / base, 3)
            for name, st in stats.items()
            if name != reference and "p50_ms" in st
        }

    return {
        "sessions": sessions,
        "scenarios": stats,
        "p50_ratio_to_floor": ratios_to(FLOOR),
        "p50_ratio_to_contract_floor": ratios_to(CONTRACT_FLOOR),
        "p50_ratio_to_local_floor": ratios_to(LOCAL_FLOOR),
    }


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


async def run(s: Settings) -> dict[str, Any]:
    started = time.time()
    machine = machine_info()
    with TemporaryDirectory(prefix="statecore-bench-") as tmp_name:
        tmp = Path(tmp_name)
        server = await start_dev_server(
            db_filename=str(tmp / "temporal.db"), log_path=str(tmp / "server.log")
        )
        try:
            facts = await server_facts(server)
            print_facts(facts)
            meter = CpuMeter(server.process.pid if server.process else None)
            async with AsyncExitStack() as stack:
                b = await set_up(stack, server.address, tmp, meter)
                print(f"1 session, {s.rounds} x {s.turns_per_round} turns per scenario", flush=True)
                single = phase_report(await single_session(b, s), b.skipped, 1)
                print(f"{s.sessions} concurrent sessions", flush=True)
                many = phase_report(await many_sessions(b, s), b.skipped, s.sessions)
                print(f"long session: {s.long_turns} turns on SQLite", flush=True)
                long, series = await long_session(b, s)
        finally:
            server.stop()
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return {
        "benchmark": "turns",
        "mode": s.mode,
        "command": " ".join([".venv/bin/python bench/turns.py", *sys.argv[1:]]),
        "machine": machine,
        "server": facts,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(s).items()},
        "scenarios": {sc.name: sc.description for sc in b.scenarios},
        "target_p50_ratio": TARGET_RATIO,
        "single_session": single,
        "concurrent": many,
        "long_session": long,
        "elapsed_seconds": round(time.time() - started, 1),
        "_series": series,
    }


def print_facts(facts: dict[str, Any]) -> None:
    print("Temporal server facts (defaults; this benchmark overrides none):")
    for key, value in facts["dynamic_config_defaults"].items():
        print(f"  {key} = {value}")
    print(f"  server {facts['server_version']}; {facts['cli_version']}", flush=True)


def print_summary(result: dict[str, Any]) -> None:
    for phase in ("single_session", "concurrent"):
        block = result[phase]
        print(f"\n{phase} ({block['sessions']} session(s))")
        print(
            f"  {'scenario':22} {'p50 ms':>8} {'p99 ms':>8} {'turns/s':>8} {'x floor':>8} "
            f"{'x floor+SA':>10} {'cpu ms/turn: bench':>19} {'server':>7}"
        )
        for name, st in block["scenarios"].items():
            if "skipped" in st:
                print(f"  {name:22} skipped: {st['skipped']}")
                continue
            ratio = block["p50_ratio_to_floor"].get(name, 1.0)
            contract = block["p50_ratio_to_contract_floor"].get(name, 1.0)
            print(
                f"  {name:22} {st['p50_ms']:8.1f} {st['p99_ms']:8.1f} "
                f"{st['turns_per_second']:8.1f} {ratio:8.2f} {contract:10.2f} "
                f"{st['bench_process_cpu_ms_per_turn']:19.1f} {st['server_cpu_ms_per_turn']:7.1f}"
            )
    long = result["long_session"]
    print(
        f"\nlong session: {long['completed_turns']}/{long['requested_turns']} turns, "
        f"{long['runs']} runs, {long['wall_seconds']:.0f} s"
    )
    first, last = long["first_window"], long["last_window"]
    print(
        f"  turns {first['turns']}: p50 {first['p50_ms']} ms, "
        f"{first['history_bytes_p50']} history bytes/turn (median)"
    )
    print(
        f"  turns {last['turns']}: p50 {last['p50_ms']} ms, "
        f"{last['history_bytes_p50']} history bytes/turn (median)"
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
    result = asyncio.run(run(settings))
    series = result.pop("_series")
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text(json.dumps(result, indent=2) + "\n")
    png = settings.out.with_suffix(".png")
    plot_turns(result, png, **series)
    print_summary(result)
    print(f"\nwrote {settings.out} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
