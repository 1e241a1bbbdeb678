"""LangGraph checkpointers on a long chat: bytes written per turn and put/get latency.

    .venv/bin/python -m bench.langgraph_bytes           # 1,000 turns -> bench/results/
    .venv/bin/python -m bench.langgraph_bytes --quick   # smoke run, 30 turns

The same one-node chat graph (tests/integrations/langgraph_chat.py) runs for N turns on one
thread with each saver: StatecoreSaver on a SQLite file and on PostgreSQL, LangGraph's
AsyncSqliteSaver (langgraph-checkpoint-sqlite) and AsyncPostgresSaver
(langgraph-checkpoint-postgres), once with the default ``add_messages`` reducer and once
with ``DeltaChannel``. After each sampled turn it reads how many payload bytes the saver's
tables hold (so the difference is what that turn wrote) and times one ``aget_tuple`` of the
thread; every ``aput`` and ``aput_writes`` the graph makes during the turn is timed. A saver
whose server is down is skipped with the reason. Needs the ``langgraph-bench`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bench.harness.environment import machine_info
from statecore.integrations.langgraph import StatecoreSaver
from statecore.store._migrate import upgrade_database
from tests.dbs import fresh_database, server_down_reason
from tests.integrations.langgraph_chat import (
    REDUCERS,
    REPLY_CHARS,
    USER_CHARS,
    build_chat,
    stored_bytes,
    user_message,
)

ROOT = Path(__file__).resolve().parent.parent
#: The turns whose latency the report quotes.
REPORT_TURNS = (10, 100, 1000)
SAVERS = ("statecore-sqlite", "statecore-postgres", "langgraph-sqlite", "langgraph-postgres")
#: aget_tuple calls timed after a sampled turn (the median is kept).
GET_REPEATS = 3


@dataclass
class Opened:
    saver: Any
    engine: AsyncEngine  # to count the bytes the saver's tables hold
    layout: str


@asynccontextmanager
async def open_saver(name: str) -> AsyncIterator[Opened]:
    dialect = "postgresql" if name.endswith("postgres") else "sqlite"
    async with fresh_database(dialect, "lgb") as url:
        if name.startswith("statecore"):
            await upgrade_database(url)
            async with StatecoreSaver.from_conn_string(url) as saver:
                yield Opened(saver, saver.engine, "statecore")
            return
        engine = create_async_engine(url)
        try:
            if dialect == "sqlite":
                from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

                path = make_url(url).database
                async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
                    await saver.setup()
                    yield Opened(saver, engine, "sqlite")
            else:
                from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

                plain = make_url(url).set(drivername="postgresql")
                conn_string = plain.render_as_string(hide_password=False)
                async with AsyncPostgresSaver.from_conn_string(conn_string) as saver:
                    await saver.setup()
                    yield Opened(saver, engine, "postgres")
        finally:
            await engine.dispose()


class CallTimer:
    """Wraps a saver's async methods to time every call the graph makes."""

    def __init__(self, saver: Any, names: tuple[str, ...]) -> None:
        self.samples: dict[str, list[float]] = {n: [] for n in names}
        for n in names:
            setattr(saver, n, self._timed(n, getattr(saver, n)))

    def _timed(self, name: str, method: Callable[..., Awaitable[Any]]) -> Any:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self.samples[name].append((time.perf_counter() - start) * 1000)

        return timed

    def take(self) -> dict[str, list[float]]:
        taken = {n: list(v) for n, v in self.samples.items()}
        for v in self.samples.values():
            v.clear()
        return taken


def sampled(turn: int, turns: int) -> bool:
    return turn <= 10 or turn % 10 == 0 or turn == turns or turn in REPORT_TURNS


async def run_one(name: str, reducer: str, turns: int) -> dict[str, Any]:
    async with open_saver(name) as opened:
        graph = build_chat(reducer, opened.saver)
        timer = CallTimer(opened.saver, ("aput", "aput_writes"))
        config = {"configurable": {"thread_id": f"chat-{name}-{reducer}"}}
        samples = []
        per_turn: list[int] = []
        before = await stored_bytes(opened.engine, opened.layout)
        started = time.perf_counter()
        for turn in range(1, turns + 1):
            measure = sampled(turn, turns)
            timer.take()
            t0 = time.perf_counter()
            result = await graph.ainvoke(user_message(turn), config)
            turn_ms = (time.perf_counter() - t0) * 1000
            after = await stored_bytes(opened.engine, opened.layout)
            per_turn.append(after - before)
            before = after
            if not measure:
                continue
            calls = timer.take()
            gets = []
            for _ in range(GET_REPEATS):
                g0 = time.perf_counter()
                await opened.saver.aget_tuple(config)
                gets.append((time.perf_counter() - g0) * 1000)
            if len(result["messages"]) != 2 * turn:
                raise AssertionError(f"{name}/{reducer}: turn {turn} lost messages")
            samples.append(
                {
                    "turn": turn,
                    "bytes": per_turn[-1],
                    # Snapshot steps come in bursts: the mean over the last 50 turns is what a
                    # turn costs on average at this length.
                    "mean_bytes_last_50": round(statistics.mean(per_turn[-50:])),
                    "total_bytes": after,
                    "turn_ms": round(turn_ms, 3),
                    "put_ms": round(statistics.mean(calls["aput"]), 3),
                    "puts": len(calls["aput"]),
                    "put_writes_ms": round(statistics.mean(calls["aput_writes"]), 3)
                    if calls["aput_writes"]
                    else None,
                    "get_ms": round(statistics.median(gets), 3),
                }
            )
        elapsed = time.perf_counter() - started
    at = {str(s["turn"]): s for s in samples if s["turn"] in REPORT_TURNS}
    print(
        f"{name:20} {reducer:8} {turns} turns in {elapsed:6.1f} s; bytes/turn "
        + ", ".join(
            f"@{t}: {s['bytes']} (mean of 50: {s['mean_bytes_last_50']})" for t, s in at.items()
        ),
        flush=True,
    )
    return {
        "saver": name,
        "reducer": reducer,
        "turns": turns,
        "seconds": round(elapsed, 1),
        "total_bytes": samples[-1]["total_bytes"],
        "samples": samples,
        "at": at,
        "bytes_per_turn": per_turn,
    }


async def run(savers: list[str], turns: int, reducers: list[str]) -> dict[str, Any]:
    runs, skipped = [], {}
    for name in savers:
        dialect = "postgresql" if name.endswith("postgres") else "sqlite"
        reason = await server_down_reason(dialect)
        if reason is not None:
            skipped[name] = reason
            print(f"skipping {name}: {reason}", flush=True)
            continue
        for reducer in reducers:
            runs.append(await run_one(name, reducer, turns))
    return {
        "benchmark": "langgraph_bytes",
        "turns": turns,
        "user_chars": USER_CHARS,
        "reply_chars": REPLY_CHARS,
        "report_turns": [t for t in REPORT_TURNS if t <= turns],
        "machine": machine_info(),
        "runs": runs,
        "skipped": skipped,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on a server
    import matplotlib.pyplot as plt  # the backend must be chosen first

    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    styles = {"default": "-", "delta": "--"}
    for r in result["runs"]:
        turns = [s["turn"] for s in r["samples"]]
        label = f"{r['saver']} ({r['reducer']})"
        style = styles[r["reducer"]]
        per_turn = r["bytes_per_turn"]
        # The mean over the last 50 turns: each window holds one DeltaChannel snapshot turn.
        window = [statistics.mean(per_turn[max(0, i - 49) : i + 1]) for i in range(len(per_turn))]
        axes[0].plot(range(1, len(per_turn) + 1), window, style, label=label)
        axes[1].plot(turns, [s["put_ms"] for s in r["samples"]], style, label=label)
        axes[2].plot(turns, [s["get_ms"] for s in r["samples"]], style, label=label)
    titles = (
        "payload bytes written per turn (mean of the last 50 turns)",
        "mean aput per turn (ms)",
        "aget_tuple (ms)",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("turn")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(
        f"LangGraph chat, {result['turns']} turns: StatecoreSaver vs LangGraph's savers "
        "(default reducer solid, DeltaChannel dashed)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: 30 turns")
    p.add_argument("--turns", type=int, help="turns per run (default 1000, quick 30)")
    p.add_argument("--savers", nargs="+", choices=SAVERS, default=list(SAVERS))
    p.add_argument("--reducers", nargs="+", choices=REDUCERS, default=list(REDUCERS))
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "langgraph_bytes.json")
    p.add_argument("--replot", type=Path, help="draw the figure of an existing result and exit")
    args = p.parse_args(argv)
    if args.replot:
        plot(json.loads(args.replot.read_text()), args.replot.with_suffix(".png"))
        return 0
    turns = args.turns or (30 if args.quick else 1000)
    result = asyncio.run(run(args.savers, turns, args.reducers))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
