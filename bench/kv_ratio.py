"""KV put and get through the storage contract against hand-written SQL, on every backend,
with 95% confidence intervals.

    .venv/bin/python -m bench.kv_ratio                      # SQLite, PostgreSQL, MariaDB
    .venv/bin/python -m bench.kv_ratio --rounds 4 --block 10   # smoke
    .venv/bin/python -m bench.kv_ratio --code /tmp/old     # another checkout's statecore

The two ways (``bench/harness/store_kv.py``: the contract's ``kv.put``/``kv.get``, each in its own
transaction, and one hand-written statement on the same engine) run in short blocks that
alternate, round after round, so a busy machine slows both alike. Per round and operation the
ratio contract / hand-written is taken of the mean latency and of this process's CPU time
(the client side of the call, which is all of it for SQLite); reported is the geometric mean
of the rounds' ratios with its 95% interval (Student's t on their logarithms). Target: within
1.5x. Writes
``bench/results/kv_ratio.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import statecore
from bench.cpu_per_turn import ratio_summary
from bench.harness.environment import machine_info
from bench.harness.store_kv import API_KEY, BUCKET, RAW_KEY, VALUE, RawKV
from statecore.core._models import KVScope
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import create_database, drop_database, server_down_reason

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.5
SCOPE = KVScope(namespace="bench", owner="agent/session")
DIALECTS = ("sqlite", "postgresql", "mysql")


async def _block(call: Callable[[], Awaitable[Any]], n: int) -> tuple[float, float]:
    """Mean wall and CPU milliseconds of ``n`` calls in a row."""
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(n):
        await call()
    return (
        1000 * (time.perf_counter() - start) / n,
        1000 * (time.process_time() - cpu) / n,
    )


async def measure(store: SqlStateStore, rounds: int, block: int) -> dict[str, Any]:
    raw = RawKV(store, SCOPE)

    async def api_put() -> None:
        async with store.transaction() as tx:
            await tx.kv.put(SCOPE, BUCKET, API_KEY, VALUE)

    async def api_get() -> None:
        async with store.transaction(read_only=True) as tx:
            entry = await tx.kv.get(SCOPE, BUCKET, API_KEY)
        assert entry is not None and entry.value == VALUE

    async def raw_put() -> None:
        await raw.put(RAW_KEY, VALUE)

    async def raw_get() -> None:
        assert await raw.get(RAW_KEY) == VALUE

    ways = {"put": (api_put, raw_put), "get": (api_get, raw_get)}
    for api, hand in ways.values():  # warm-up: connections, statement caches, the keys
        await _block(api, block)
        await _block(hand, block)
    out: dict[str, Any] = {}
    for op, (api, hand) in ways.items():
        rows: list[dict[str, float]] = []
        for r in range(rounds):
            order = [("api", api), ("raw", hand)] if r % 2 == 0 else [("raw", hand), ("api", api)]
            got = {name: await _block(call, block) for name, call in order}
            rows.append(
                {
                    "api_ms": got["api"][0],
                    "raw_ms": got["raw"][0],
                    "latency_ratio": got["api"][0] / got["raw"][0],
                    "cpu_ratio": got["api"][1] / got["raw"][1] if got["raw"][1] else 0.0,
                }
            )
        latency = ratio_summary([x["latency_ratio"] for x in rows])
        cpu_values = [x["cpu_ratio"] for x in rows if x["cpu_ratio"] > 0]
        out[op] = {
            "contract_ms": round(statistics.fmean(x["api_ms"] for x in rows), 3),
            "hand_written_ms": round(statistics.fmean(x["raw_ms"] for x in rows), 3),
            "latency_ratio": latency,
            "cpu_ratio": ratio_summary(cpu_values) if len(cpu_values) > 1 else None,
            "met": latency["geometric_mean"] <= TARGET,
        }
    return out


async def run(a: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for dialect in a.db:
        if dialect == "sqlite":
            with tempfile.TemporaryDirectory(prefix="statecore-kv-") as tmp:
                url = f"sqlite+aiosqlite:///{tmp}/kv.db"
                results[dialect] = await _on(url, a)
        else:
            reason = await server_down_reason(dialect)
            if reason is not None:
                results[dialect] = {"skipped": reason}
                continue
            url = await create_database(dialect, "kv")
            try:
                results[dialect] = await _on(url, a)
            finally:
                await drop_database(url)
        r = results[dialect]
        for op in ("put", "get"):
            ratio = r[op]["latency_ratio"]
            print(
                f"{dialect} {op}: contract {r[op]['contract_ms']:.3f} ms, hand-written "
                f"{r[op]['hand_written_ms']:.3f} ms, ratio {ratio['geometric_mean']:.2f} "
                f"(95% CI {ratio['ci95'][0]:.2f}..{ratio['ci95'][1]:.2f})"
            )
    return results


async def _on(url: str, a: argparse.Namespace) -> dict[str, Any]:
    await upgrade_database(url)
    store = await SqlStateStore.connect(url)
    try:
        return await measure(store, a.rounds, a.block)
    finally:
        await store.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--block", type=int, default=25, help="calls per way per round")
    p.add_argument("--db", nargs="+", default=list(DIALECTS), choices=DIALECTS)
    p.add_argument("--code", help="a checkout whose statecore to measure (default: this one)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "kv_ratio.json")
    a = p.parse_args(argv)
    if a.rounds < 2:
        p.error("--rounds must be at least 2 for a confidence interval")
    results = asyncio.run(run(a))
    doc = {
        "what": "KV put/get via the contract over hand-written SQL (geometric mean of rounds)",
        "target": TARGET,
        "statecore": str(Path(statecore.__file__).parent),
        "rounds": a.rounds,
        "block": a.block,
        "results": results,
        "machine": machine_info(),
    }
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
