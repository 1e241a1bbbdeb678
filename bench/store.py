"""Storage benchmark: does a turn's storage work cost the same at 100 messages and at 1,000,000?

    .venv/bin/python -m bench.store            # full run (writes bench/results/store.{json,png})
    .venv/bin/python -m bench.store --quick    # smoke run (10,000 messages), under a minute

On a SQLite file and on PostgreSQL (fresh databases; skipped with the reason when the server
is down), in one run: appending one message, assembling a 4,096-token context, and KV
put/get against hand-written SQL. The two sizes (and the two KV ways) take turns in rotating
blocks so a noisy machine slows them alike. See bench/README.md for the method.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.environment import machine_info
from bench.harness.store_data import Seeded, seed_session, settle, verify_rows, verify_session
from bench.harness.store_kv import run_kv
from bench.harness.store_plot import plot_store
from bench.harness.store_probe import CountingTokenCounter, StatementLog, explain
from statecore.core._models import Message, SessionRef
from statecore.operations._context_window import assemble_context
from statecore.store import open_store
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database, server_down_reason

ROOT = Path(__file__).resolve().parent.parent
#: Targets: p50 at the large size over p50 at the small size.
TARGET_APPEND_RATIO = 1.2
TARGET_CONTEXT_RATIO = 2.0
CONTEXT_BUDGET = 4096
SMALL_MESSAGES = 100
DIALECTS = ("sqlite", "postgresql")
NEW_MESSAGE = "turn {n:06d}: what changed since my last message, and what should I look at next?"


@dataclass
class Settings:
    mode: str
    large_messages: int
    appends: int
    contexts: int
    kv_iterations: int
    warmup: int
    block: int
    out: Path


def parse_args(argv: list[str] | None = None) -> Settings:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: 10,000 messages, few ops")
    p.add_argument("--out", type=Path, help="JSON path (the PNG goes next to it)")
    p.add_argument("--large-messages", type=int, help="messages of the large session")
    p.add_argument("--appends", type=int, help="measured appends per size")
    p.add_argument("--contexts", type=int, help="measured context assemblies per size")
    p.add_argument("--kv", type=int, help="measured KV operations per kind and way")
    a = p.parse_args(argv)
    quick = a.quick
    results = ROOT / "bench" / "results"
    return Settings(
        mode="quick" if quick else "full",
        large_messages=a.large_messages or (10_000 if quick else 1_000_000),
        appends=a.appends or (40 if quick else 200),
        contexts=a.contexts or (30 if quick else 200),
        kv_iterations=a.kv or (60 if quick else 500),
        warmup=5 if quick else 10,
        block=10,
        out=a.out or results / ("store-quick.json" if quick else "store.json"),
    )


@dataclass
class Size:
    """One session of a given length, in a database of its own."""

    name: str
    store: SqlStateStore
    ref: SessionRef
    log: StatementLog
    seeded: Seeded


@dataclass
class Measured:
    latencies: list[float] = field(default_factory=list)
    statements: list[int] = field(default_factory=list)
    tokenized_chars: list[int] = field(default_factory=list)
    cpu_seconds: float = 0.0
    results: list[Any] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between ranks (numpy's default)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_stats(latencies: list[float], cpu_seconds: float = 0.0) -> dict[str, Any]:
    ms = [x * 1000 for x in latencies]
    return {
        "ops": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p90_ms": round(percentile(ms, 90), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
        "min_ms": round(min(ms), 3),
        "max_ms": round(max(ms), 3),
        # This process's CPU (all threads: SQLite itself runs in aiosqlite's thread).
        "process_cpu_ms_per_op": round(cpu_seconds * 1000 / len(ms), 3),
    }


Op = Callable[[Size, int], Awaitable[Any]]


async def interleaved(
    sizes: list[Size], op: Op, count: int, s: Settings, counter: CountingTokenCounter
) -> dict[str, Measured]:
    """``count`` measured ops per size after ``s.warmup`` unmeasured ones, the sizes taking
    turns in blocks of ``s.block`` whose order alternates round by round."""
    out = {size.name: Measured() for size in sizes}
    for size in sizes:
        for n in range(s.warmup):
            await op(size, n)
    n = s.warmup
    for r in range((count + s.block - 1) // s.block):
        for size in sizes if r % 2 == 0 else list(reversed(sizes)):
            m = out[size.name]
            for _ in range(min(s.block, count - len(m.latencies))):
                statements, chars = size.log.count, counter.characters
                cpu, start = time.process_time(), time.perf_counter()
                result = await op(size, n)
                m.latencies.append(time.perf_counter() - start)
                m.cpu_seconds += time.process_time() - cpu
                m.statements.append(size.log.count - statements)
                m.tokenized_chars.append(counter.characters - chars)
                m.results.append(result)
                n += 1
    return out


def new_message(n: int) -> Message:
    return Message(role="user", content=NEW_MESSAGE.format(n=n))


async def append_one(size: Size, n: int) -> int:
    async with size.store.transaction() as tx:
        stored = await tx.conversation.append(
            size.ref, f"bench-{uuid.uuid4().hex}", [new_message(n)]
        )
    return stored[0].seq


def context_op(counter: CountingTokenCounter) -> Op:
    async def assemble(size: Size, n: int) -> dict[str, int]:
        async with size.store.transaction() as tx:
            ctx = await assemble_context(
                tx, size.ref, [new_message(n)], max_tokens=CONTEXT_BUDGET, counter=counter
            )
        return {"window_messages": ctx.window_messages, "tokens": ctx.tokens}

    return assemble


class _Discard(Exception):
    """Raised to roll a probe transaction back."""


async def plans(size: Size, counter: CountingTokenCounter) -> dict[str, Any]:
    """Statements and their plans for one append (rolled back) and one context assembly."""
    with size.log.recording() as appended:
        try:
            async with size.store.transaction() as tx:
                await tx.conversation.append(size.ref, "bench-probe", [new_message(0)])
                raise _Discard
        except _Discard:
            pass
    with size.log.recording() as assembled:
        await context_op(counter)(size, 0)
    dialect = size.store.dialect
    return {
        "append": await explain(size.store.engine, dialect, appended),
        "context": await explain(size.store.engine, dialect, assembled),
    }


def work_growth(probes: dict[str, Any], dialect: str) -> dict[str, list[float | None]]:
    """Per statement, the work done at the large size over the work at the small size:
    SQLite's virtual machine instructions, PostgreSQL's pages touched. A statement that
    walks the log grows with it; a seek stays near 1 (PostgreSQL's B-trees gain a level)."""
    measure = "vm_instructions" if dialect == "sqlite" else "buffers"
    out: dict[str, list[float | None]] = {}
    for kind, small in probes["small"].items():
        large = probes["large"][kind]
        assert [p["statement"] for p in small] == [p["statement"] for p in large]
        out[kind] = [
            round(b[measure] / a[measure], 2) if a[measure] else None
            for a, b in zip(small, large, strict=True)
        ]
    return out


def phase_report(measured: dict[str, Measured], target: float) -> dict[str, Any]:
    block: dict[str, Any] = {}
    for name, m in measured.items():
        block[name] = {
            **latency_stats(m.latencies, m.cpu_seconds),
            "statements_per_op": sorted(set(m.statements)),
            "tokenized_chars_per_op": sorted(set(m.tokenized_chars)),
        }
    small, large = block["small"], block["large"]
    block["p50_ratio"] = round(large["p50_ms"] / small["p50_ms"], 3)
    block["p99_ratio"] = round(large["p99_ms"] / small["p99_ms"], 3)
    block["target_p50_ratio"] = target
    block["met"] = block["p50_ratio"] <= target
    return block


async def open_size(
    stack: AsyncExitStack, name: str, dialect: str, messages: int, counter: CountingTokenCounter
) -> Size:
    url = await stack.enter_async_context(fresh_database(dialect, f"store_{name}"))
    store = await open_store(url, migrate=True, token_counter=counter)
    assert isinstance(store, SqlStateStore)
    stack.push_async_callback(store.close)
    ref = SessionRef(agent_id="bench-agent", session_id=f"{name}-{messages}")
    print(f"  {name}: seeding {messages:,} messages", flush=True)
    seeded = await seed_session(store, ref, messages, counter, progress=messages >= 200_000)
    await settle(store)
    return Size(name, store, ref, StatementLog(store.engine), seeded)


async def bench_dialect(dialect: str, s: Settings) -> dict[str, Any]:
    counter = CountingTokenCounter()
    async with AsyncExitStack() as stack:
        small = await open_size(stack, "small", dialect, SMALL_MESSAGES, counter)
        large = await open_size(stack, "large", dialect, s.large_messages, counter)
        sizes = [small, large]
        seeds: dict[str, Any] = {}
        for size in sizes:
            seeds[size.name] = {
                "messages": size.seeded.messages,
                "token_total": size.seeded.token_total,
                "seed_seconds": round(size.seeded.seconds, 1),
                **await verify_session(size.store, size.ref, size.seeded),
                **await verify_rows(size.store, size.ref, size.seeded),
            }
        print(f"  {dialect}: context assembly", flush=True)
        context = await interleaved(sizes, context_op(counter), s.contexts, s, counter)
        print(f"  {dialect}: append", flush=True)
        append = await interleaved(sizes, append_one, s.appends, s, counter)
        print(f"  {dialect}: statement plans", flush=True)
        probes = {size.name: await plans(size, counter) for size in sizes}
        print(f"  {dialect}: KV against hand-written SQL", flush=True)
        kv = await run_kv(large.store, large.ref.kv_scope, s.kv_iterations, s.warmup)
        after = {}
        for size in sizes:
            async with size.store.transaction() as tx:
                info = await tx.sessions.get(size.ref)
            assert info is not None
            expected = size.seeded.messages + s.warmup + s.appends
            assert info.last_seq == info.message_count == expected, (info, expected)
            assert append[size.name].results[-1] == expected
            after[size.name] = {"last_seq": info.last_seq, "message_count": info.message_count}
    context_block = phase_report(context, TARGET_CONTEXT_RATIO)
    for name in ("small", "large"):
        windows = context[name].results
        context_block[name]["window_messages"] = sorted({w["window_messages"] for w in windows})
        context_block[name]["context_tokens_max"] = max(w["tokens"] for w in windows)
    kv_block: dict[str, Any] = {name: latency_stats(*measured) for name, measured in kv.items()}
    for op in ("put", "get"):
        ratio = kv_block[f"api_{op}"]["p50_ms"] / kv_block[f"raw_{op}"]["p50_ms"]
        kv_block[f"{op}_p50_ratio_api_to_raw"] = round(ratio, 3)
    return {
        "sessions": seeds,
        "append": phase_report(append, TARGET_APPEND_RATIO),
        "context": context_block,
        "plans": probes,
        "work_growth_large_to_small": work_growth(probes, dialect),
        "no_full_scan_of_messages": not any(
            p["full_scan_of_messages"] for kind in probes["large"].values() for p in kind
        ),
        "kv": kv_block,
        "after": after,
        "_samples_ms": {
            "append": {n: [x * 1000 for x in m.latencies] for n, m in append.items()},
            "context": {n: [x * 1000 for x in m.latencies] for n, m in context.items()},
            "kv": {n: [x * 1000 for x in v] for n, (v, _) in kv.items()},
        },
    }


async def run(s: Settings) -> dict[str, Any]:
    started = time.time()
    machine = machine_info()
    dialects: dict[str, Any] = {}
    for dialect in DIALECTS:
        reason = await server_down_reason(dialect)
        if reason is not None:
            print(f"SKIPPED {dialect}: {reason}", flush=True)
            dialects[dialect] = {"skipped": reason}
            continue
        print(f"{dialect}: {SMALL_MESSAGES} and {s.large_messages:,} messages", flush=True)
        dialects[dialect] = await bench_dialect(dialect, s)
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return {
        "benchmark": "store",
        "mode": s.mode,
        "command": " ".join([".venv/bin/python -m bench.store", *sys.argv[1:]]),
        "machine": machine,
        "settings": {
            **{k: str(v) if isinstance(v, Path) else v for k, v in asdict(s).items()},
            "small_messages": SMALL_MESSAGES,
            "context_budget_tokens": CONTEXT_BUDGET,
        },
        "targets": {
            "append_p50_ratio": TARGET_APPEND_RATIO,
            "context_p50_ratio": TARGET_CONTEXT_RATIO,
        },
        "dialects": dialects,
        "elapsed_seconds": round(time.time() - started, 1),
    }


def print_summary(result: dict[str, Any]) -> None:
    for dialect, block in result["dialects"].items():
        if "skipped" in block:
            print(f"\n{dialect}: skipped ({block['skipped']})")
            continue
        large = block["sessions"]["large"]["messages"]
        print(f"\n{dialect} (small {SMALL_MESSAGES} / large {large:,} messages)")
        print(
            f"  {'':10} {'p50 small':>10} {'p50 large':>10} {'p99 small':>10} {'p99 large':>10}"
            f" {'ratio':>6} {'target':>6} statements"
        )
        for phase in ("append", "context"):
            ph = block[phase]
            print(
                f"  {phase:10} {ph['small']['p50_ms']:10.2f} {ph['large']['p50_ms']:10.2f} "
                f"{ph['small']['p99_ms']:10.2f} {ph['large']['p99_ms']:10.2f} "
                f"{ph['p50_ratio']:6.2f} {ph['target_p50_ratio']:6.1f} "
                f"{ph['small']['statements_per_op']} / {ph['large']['statements_per_op']}"
                f"{'' if ph['met'] else '  MISSED'}"
            )
        kv = block["kv"]
        for op in ("put", "get"):
            print(
                f"  kv {op}: contract p50 {kv[f'api_{op}']['p50_ms']:.2f} ms, hand-written "
                f"{kv[f'raw_{op}']['p50_ms']:.2f} ms, ratio {kv[f'{op}_p50_ratio_api_to_raw']}"
            )
        print(f"  no full scan of messages at {large:,}: {block['no_full_scan_of_messages']}")


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    result = asyncio.run(run(settings))
    samples = {
        d: block.pop("_samples_ms")
        for d, block in result["dialects"].items()
        if "skipped" not in block
    }
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text(json.dumps(result, indent=2) + "\n")
    png = settings.out.with_suffix(".png")
    plot_store(result, samples, png)
    print_summary(result)
    print(f"\nwrote {settings.out} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
