"""Many open sessions on one worker: what a turn costs when its session is not cached.

    .venv/bin/python -m bench.open_sessions --db sqlite                    # 1,200 sessions
    .venv/bin/python -m bench.open_sessions --db postgresql --idle-continue 0   # before
    .venv/bin/python -m bench.open_sessions --db sqlite --sessions 10000   # the full scale
    .venv/bin/python -m bench.open_sessions --quick                       # SMOKE TEST

The worker is ``python worker.py`` in its own process with every default (the SDK keeps
1,000 workflows in its cache), against a Temporal dev server whose continue-as-new suggestion
is raised so a run can hold 1,000 turns. Each session's runs continue as new after
``--idle-continue`` idle seconds (the session default, 60; 0 is the behaviour before it).
Phases, each measured on its own (latency, worker / dev server / PostgreSQL CPU per turn,
the worker's cache hit and miss counters):

1. **probes**: one session per run length (10, 100, 500, 1,000 turns) is built up.
2. **open**: every session takes its first turn (update-with-start); the worker's RSS is
   sampled against the number of sessions opened so far.
3. **sweep**: every session once, in random order: each was last touched all the other
   sessions ago, so with more sessions than the cache holds every turn is uncached.
4. **hot**: turns to 20 sessions only: every turn is cached.
5. **uniform** and **skewed** (80% of turns to the 20 hot sessions): sessions drawn at random;
   a turn counts as cached when its session is among the last 1,000 distinct ones touched.
6. After phases 3 and 5 each probe takes one turn: the uncached turn against its run length.

Writes ``bench/results/open_sessions_<db>_idle<N>.json`` and a PNG beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool
from temporalio.client import Client

from bench.harness.environment import machine_info, server_facts
from bench.harness.load_checks import scrape
from bench.harness.load_probes import proc_status_kib
from bench.harness.measure import percentile
from bench.harness.process_cpu import PostgresBackends, process_cpu_seconds
from statecore.core._limits import DEFAULT_IDLE_CONTINUE_SECONDS
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._converter import statecore_data_converter
from statecore.temporal._devserver import free_port, start_dev_server
from tests.dbs import create_database, drop_database, server_down_reason
from tests.worker_cli import base_env, worker_cli

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "open-sessions"
AGENT = "open"
CACHE = 1000  # the SDK's default max_cached_workflows, which worker.py keeps
HOT = 20
CONTENT = "turn {n}: please look at what we have so far and suggest the next step."


def summary(ms: list[float]) -> dict[str, Any]:
    if not ms:
        return {"turns": 0}
    return {
        "turns": len(ms),
        **{f"p{p}_ms": round(percentile(ms, p), 1) for p in (50, 90, 99)},
        "mean_ms": round(sum(ms) / len(ms), 1),
    }


class Bench:
    def __init__(self, sessions: AgentSessionClient, args: argparse.Namespace) -> None:
        self.sc = sessions
        self.args = args
        self.rng = random.Random(args.seed)
        self.lru: OrderedDict[str, None] = OrderedDict()
        self.counter = 0
        self.opened: set[str] = set()
        self.options: dict[str, Any] = {"idle_continue_seconds": args.idle_continue}
        if args.idle_min_events is not None:
            self.options["idle_continue_min_events"] = args.idle_min_events

    def predicted_cached(self, session: str) -> bool:
        """Whether ``session`` is among the last CACHE distinct sessions touched (the SDK's
        cache evicts the least recently used); records the touch."""
        keys = list(self.lru)
        cached = session in self.lru and keys.index(session) >= len(keys) - CACHE
        self.lru.pop(session, None)
        self.lru[session] = None
        while len(self.lru) > 4 * CACHE:
            self.lru.popitem(last=False)
        return cached

    async def turn(self, session: str, **extra: Any) -> float:
        self.counter += 1
        n = self.counter
        self.opened.add(session)
        start = time.perf_counter()
        await self.sc.send(
            AGENT,
            session,
            CONTENT.format(n=n),
            turn_id=f"{session}-{n}",
            **self.options,
            **extra,
        )
        return (time.perf_counter() - start) * 1000

    async def drive(self, sessions: list[str]) -> tuple[list[float], list[bool]]:
        """Turns to ``sessions`` in order, ``--concurrency`` at a time."""
        latencies: list[float] = [0.0] * len(sessions)
        cached = [self.predicted_cached(s) for s in sessions]
        queue = list(enumerate(sessions))
        queue.reverse()

        async def worker() -> None:
            while queue:
                i, session = queue.pop()
                latencies[i] = await self.turn(session)

        await asyncio.gather(*(worker() for _ in range(self.args.concurrency)))
        return latencies, cached


class Meter:
    """Worker, dev server and PostgreSQL CPU, and the worker's cache counters."""

    def __init__(self, worker_pid: int, server_pid: int, metrics_port: int, db: str | None):
        self.worker_pid, self.server_pid, self.port = worker_pid, server_pid, metrics_port
        self.pg = PostgresBackends(db) if db else None
        if self.pg:
            self.pg.cpu_seconds()

    def cache(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, _labels, value in scrape(self.port):
            if "sticky_cache" in name:
                key = name.removeprefix("temporal_")
                out[key] = out.get(key, 0.0) + value
        return out

    def read(self) -> dict[str, Any]:
        return {
            "worker": process_cpu_seconds(self.worker_pid) or 0.0,
            "server": process_cpu_seconds(self.server_pid) or 0.0,
            "postgresql": self.pg.cpu_seconds() if self.pg else 0.0,
            "cache": self.cache(),
            "wall": time.perf_counter(),
        }

    @staticmethod
    def per_turn(a: dict[str, Any], b: dict[str, Any], turns: int) -> dict[str, Any]:
        cpu = {
            f"{k}_cpu_ms_per_turn": round((b[k] - a[k]) * 1000 / max(turns, 1), 2)
            for k in ("worker", "server", "postgresql")
        }
        counters = {k: b["cache"].get(k, 0) - a["cache"].get(k, 0) for k in b["cache"]}
        counters = {k: v for k, v in counters.items() if "size" not in k}
        return {**cpu, "cache_counters": counters, "wall_seconds": round(b["wall"] - a["wall"], 1)}


async def phase(bench: Bench, meter: Meter, name: str, sessions: list[str]) -> dict[str, Any]:
    before = meter.read()
    latencies, cached = await bench.drive(sessions)
    after = meter.read()
    hits = [ms for ms, c in zip(latencies, cached, strict=True) if c]
    misses = [ms for ms, c in zip(latencies, cached, strict=True) if not c]
    out = {
        "phase": name,
        "all": summary(latencies),
        "predicted_cached": summary(hits),
        "predicted_uncached": summary(misses),
        **Meter.per_turn(before, after, len(sessions)),
        "cached_sessions_after": after["cache"].get("sticky_cache_size"),
    }
    print(
        f"  {name}: {out['all']} cached {out['predicted_cached'].get('p50_ms')} "
        f"uncached {out['predicted_uncached'].get('p50_ms')} counters {out['cache_counters']}"
    )
    return out


async def probe(bench: Bench, lengths: list[int], label: str) -> list[dict[str, Any]]:
    rows = []
    for length in lengths:
        bench.predicted_cached(f"probe-{length}")
        ms = await bench.turn(f"probe-{length}", max_turns_per_run=1900)
        rows.append({"turns_built": length, "after": label, "latency_ms": round(ms, 1)})
    return rows


async def sample_memory(meter: Meter, bench: Bench, out: list[list[float]], stop: asyncio.Event):
    while not stop.is_set():
        size = meter.cache().get("sticky_cache_size", 0.0)
        rss = proc_status_kib(meter.worker_pid, "VmRSS") / 1024
        out.append([round(time.perf_counter(), 2), len(bench.opened), size, round(rss, 1)])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


async def measure(
    args: argparse.Namespace, address: str, pids: tuple[int, int], port: int, db: str | None
) -> dict[str, Any]:
    client = await Client.connect(address, data_converter=statecore_data_converter())
    bench = Bench(AgentSessionClient(client, task_queue=QUEUE), args)
    meter = Meter(pids[0], pids[1], port, db)
    memory: list[list[float]] = []
    stop = asyncio.Event()
    sampler = asyncio.ensure_future(sample_memory(meter, bench, memory, stop))
    names = [f"s{n:05d}" for n in range(args.sessions)]
    hot = names[:HOT]
    phases, probes = [], []
    rss_idle = proc_status_kib(pids[0], "VmRSS") / 1024

    async def build(length: int) -> None:
        for _ in range(length):
            bench.predicted_cached(f"probe-{length}")
            await bench.turn(f"probe-{length}", max_turns_per_run=1900)

    print(f"open_sessions: {args.sessions} sessions, {args.db}, idle_continue {args.idle_continue}")
    await asyncio.gather(*(build(n) for n in args.probe_turns))
    phases.append(await phase(bench, meter, "open", names))
    sweep = names[:]
    bench.rng.shuffle(sweep)
    phases.append(await phase(bench, meter, "sweep", sweep))
    probes += await probe(bench, args.probe_turns, "sweep")
    phases.append(
        await phase(bench, meter, "hot", [bench.rng.choice(hot) for _ in range(args.hot_turns)])
    )
    uniform = [bench.rng.choice(names) for _ in range(args.random_turns)]
    phases.append(await phase(bench, meter, "uniform", uniform))
    skewed = [
        bench.rng.choice(hot) if bench.rng.random() < 0.8 else bench.rng.choice(names)
        for _ in range(args.random_turns)
    ]
    phases.append(await phase(bench, meter, "skewed", skewed))
    probes += await probe(bench, args.probe_turns, "skewed")
    stop.set()
    await sampler
    t0 = memory[0][0] if memory else 0.0
    return {
        "phases": phases,
        "probes": probes,
        "worker_rss_idle_mib": round(rss_idle, 1),
        "memory_timeline": {
            "columns": ["seconds", "sessions_touched", "cached_workflows", "worker_rss_mib"],
            "rows": [[round(r[0] - t0, 1), *r[1:]] for r in memory],
        },
    }


async def database_size(url: str, tmp: str) -> dict[str, Any]:
    """What statecore's database holds after the run: its size on disk, per table (PostgreSQL)
    or the SQLite file, and the sessions and messages in it."""
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            sessions = (
                await conn.execute(text("SELECT count(*) FROM statecore_sessions"))
            ).scalar()
            messages = (
                await conn.execute(text("SELECT count(*) FROM statecore_messages"))
            ).scalar()
            out: dict[str, Any] = {"sessions": sessions, "messages": messages}
            if url.startswith("postgresql"):
                rows = await conn.execute(
                    text(
                        "SELECT relname, pg_total_relation_size(c.oid) FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE relkind = 'r' AND n.nspname = 'public' "
                        "AND relname LIKE 'statecore_%'"
                    )
                )
                tables = {name: int(size) for name, size in rows}
                out["tables_bytes"] = tables
                out["bytes"] = sum(tables.values())
            else:
                out["bytes"] = sum(f.stat().st_size for f in Path(tmp).glob("statecore.db*"))
    finally:
        await engine.dispose()
    out["bytes_per_session"] = round(out["bytes"] / max(out["sessions"] or 1, 1))
    out["bytes_per_message"] = round(out["bytes"] / max(out["messages"] or 1, 1))
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    overrides = {"limit.historyCount.suggestContinueAsNew": "40000"}
    with tempfile.TemporaryDirectory(prefix="statecore-open-") as tmp:
        url = (
            f"sqlite+aiosqlite:///{tmp}/statecore.db"
            if args.db == "sqlite"
            else await create_database("postgresql", "open")
        )
        server = await start_dev_server(
            db_filename=f"{tmp}/temporal.db",
            log_path=f"{tmp}/temporal.log",
            dynamic_config=overrides,
        )
        try:
            facts = await server_facts(server, overrides)
            port = free_port()
            cli = [
                "--address",
                server.address,
                "--database-url",
                url,
                "--task-queue",
                QUEUE,
                "--metrics-port",
                str(port),
            ]
            async with worker_cli(cli, base_env(), Path(tmp) / "worker.log") as worker:
                assert server.process is not None
                db = url.rsplit("/", 1)[1] if args.db == "postgresql" else None
                report = await measure(
                    args, server.address, (worker.pid, server.process.pid), port, db
                )
                report["database"] = await database_size(url, tmp)
        finally:
            server.stop()
            if args.db == "postgresql":
                await drop_database(url)
    return {
        "benchmark": "open_sessions",
        "smoke": args.quick,
        "command": " ".join([".venv/bin/python -m bench.open_sessions", *sys.argv[1:]]),
        "machine": machine_info(),
        "server": facts,
        "settings": {k: v for k, v in vars(args).items() if k != "out"} | {"cache": CACHE},
        **report,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    p.add_argument("--sessions", type=int, default=1200)
    p.add_argument("--idle-continue", type=int, default=DEFAULT_IDLE_CONTINUE_SECONDS)
    p.add_argument(
        "--idle-min-events",
        type=int,
        help="idle_continue_min_events of every session (default: the session default, 200)",
    )
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--random-turns", type=int, default=600)
    p.add_argument("--hot-turns", type=int, default=200)
    p.add_argument("--probe-turns", type=int, nargs="+", default=[10, 100, 500, 1000])
    p.add_argument("--seed", type=int, default=45)
    p.add_argument("--quick", action="store_true", help="smoke test: 30 sessions, short runs")
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    if a.quick:
        a.sessions, a.random_turns, a.hot_turns, a.probe_turns = 30, 30, 20, [3, 10]
    results = ROOT / "bench" / "results"
    stem = "open_sessions-quick" if a.quick else f"open_sessions_{a.db}_idle{a.idle_continue}"
    if a.idle_min_events is not None and not a.quick:
        stem += f"_min{a.idle_min_events}"
    a.out = a.out or results / f"{stem}.json"
    if a.quick and a.out.parent.resolve() == results.resolve() and a.out.stem != stem:
        p.error("a smoke run writes only bench/results/open_sessions-quick.*")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.db == "postgresql" and (reason := asyncio.run(server_down_reason("postgresql"))):
        print(f"open_sessions: cannot run: {reason}")
        return 2
    result = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    from bench.harness.open_sessions_plot import plot_open_sessions

    plot_open_sessions([result], args.out.with_suffix(".png"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
