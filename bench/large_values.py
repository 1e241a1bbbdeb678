"""A large scoped-state document read and updated turn after turn, with large payloads stored
by reference in statecore's database (docs/large_values.md).

Scenarios, each on a fresh database and its own dev server workflow, ``--turns`` turns each:

- ``16mib_blobs``: a document 64 bytes under the 16 MiB limit (random hex: it compresses to
  about half),
  ``StatecorePlugin(blob_threshold_bytes=256 KiB)``;
- ``1kib_blobs``: a 1 KiB document, the same plugin: payloads under the threshold;
- ``1kib_inline``: a 1 KiB document, no blob storage (what statecore did before).

Each turn reads the whole document (``turn.state.get``, a local activity), rewrites 1 KiB of
it and commits (a local activity). Per turn it records the update's round trip, the bytes the
turn added to history (the history's events, as Temporal serialises them) and the bytes the
blob table gained (stored, after compression). The document's own row is rewritten in place
every turn (its size is reported once).

    .venv/bin/python -m bench.large_values --dialect sqlite --turns 30
    .venv/bin/python -m bench.large_values --plot-only     # redraw from the committed JSON
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from bench.large_values_workflow import WORKFLOW_TYPE, LargeDocument, TurnAsk
from statecore.core._limits import MAX_STATE_BYTES
from statecore.core._models import SessionRef
from statecore.store import open_store
from statecore.store._inputs import encode_state
from statecore.store._migrate import upgrade_database
from statecore.store.sql._blobs import BlobTable
from statecore.temporal._devserver import start_dev_server
from statecore.temporal._plugin import StatecorePlugin

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "large_values"
THRESHOLD = 256 * 1024
#: Longest one turn may take before the run counts as stuck (16 MiB in and out on a shared
#: two-core machine takes a few seconds).
TURN_TIMEOUT_SECONDS = 300
SCENARIOS = {
    # 64 bytes of room: the document's turn counter grows by a digit now and then.
    "16mib_blobs": (MAX_STATE_BYTES - 64, THRESHOLD),
    "1kib_blobs": (1024, THRESHOLD),
    "1kib_inline": (1024, None),
}


def _document_text(size: int) -> str:
    """Random hex text so that the document, with its envelope, is ``size`` bytes."""
    overhead = len(encode_state({"text": "", "turns": 0}).encode())
    length = size - overhead
    return random.Random(41).randbytes(length // 2 + 1).hex()[:length]


async def _database(dialect: str, folder: Path) -> str:
    if dialect == "sqlite":
        return f"sqlite+aiosqlite:///{folder / f'large-{uuid.uuid4().hex[:6]}.db'}"
    from tests.dbs import create_database  # only for the local servers; see bench/README.md

    return await create_database(dialect, "bench_lv")


async def run_scenario(
    name: str, dialect: str, address: str, turns: int, folder: Path
) -> dict[str, Any]:
    size, threshold = SCENARIOS[name]
    url = await _database(dialect, folder)
    await upgrade_database(url)
    ref = SessionRef(agent_id="bench-large", session_id=f"{name}-{uuid.uuid4().hex[:6]}")
    store = await open_store(url)
    try:
        async with store.transaction() as tx:
            await tx.state.create(
                ref.namespace,
                ref.session_id,
                ref.agent_id,
                {"text": _document_text(size), "turns": 0},
            )
    finally:
        await store.close()
    blobs = BlobTable.open(url)
    plugin = StatecorePlugin(url, extra_workflows=[LargeDocument], blob_threshold_bytes=threshold)
    client = await Client.connect(address, plugins=[plugin])
    queue = f"large-{uuid.uuid4().hex[:8]}"
    rows: list[dict[str, Any]] = []
    async with Worker(client, task_queue=queue):
        handle = await client.start_workflow(
            WORKFLOW_TYPE, ref, id=f"bench-large-{ref.session_id}", task_queue=queue
        )
        history_before = await _history_bytes(handle)
        stored_before = (await blobs.totals())[2]
        for number in range(1, turns + 1):
            started = time.perf_counter()
            done = await asyncio.wait_for(
                handle.execute_update("turn", TurnAsk(turn_id=f"t{number}"), result_type=int),
                TURN_TIMEOUT_SECONDS,
            )
            elapsed = time.perf_counter() - started
            assert done == number, (done, number)
            history = await _history_bytes(handle)
            stored = (await blobs.totals())[2]
            rows.append(
                {
                    "turn": number,
                    "latency_ms": round(elapsed * 1000, 1),
                    "history_bytes": history - history_before,
                    "blob_bytes": stored - stored_before,
                }
            )
            history_before, stored_before = history, stored
        await handle.terminate("benchmark done")
        count, payload_bytes, stored_bytes = await blobs.totals()
    await blobs.close()
    latencies = [r["latency_ms"] for r in rows]
    return {
        "scenario": name,
        "dialect": dialect,
        "document_bytes": size,
        "blob_threshold_bytes": threshold,
        "turns": rows,
        "latency_ms_median": statistics.median(latencies),
        "latency_ms_p95": sorted(latencies)[int(0.95 * (len(latencies) - 1))],
        "history_bytes_per_turn_median": statistics.median(r["history_bytes"] for r in rows),
        "blob_bytes_per_turn_median": statistics.median(r["blob_bytes"] for r in rows),
        "blobs": {"count": count, "payload_bytes": payload_bytes, "stored_bytes": stored_bytes},
    }


async def _history_bytes(handle: Any) -> int:
    history = await handle.fetch_history()
    return sum(event.ByteSize() for event in history.events)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for result in results:
        label = f"{result['scenario']} ({result['dialect']})"
        turns = [r["turn"] for r in result["turns"]]
        axes[0].plot(turns, [r["latency_ms"] for r in result["turns"]], marker=".", label=label)
        axes[1].plot(turns, [r["history_bytes"] for r in result["turns"]], marker=".", label=label)
        axes[2].plot(turns, [r["blob_bytes"] for r in result["turns"]], marker=".", label=label)
    axes[0].set(title="turn latency (update round trip)", xlabel="turn", ylabel="ms")
    axes[0].set_yscale("log")
    axes[1].set(title="history bytes added per turn", xlabel="turn", ylabel="bytes")
    axes[2].set(title="blob table bytes added per turn (stored)", xlabel="turn", ylabel="bytes")
    axes[2].set_yscale("symlog")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("statecore: a document read and rewritten every turn, large payloads by reference")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


async def main_async(args: argparse.Namespace) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"statecore_{args.dialect}.json"
    with tempfile.TemporaryDirectory(prefix="bench-large-") as tmp:
        folder = Path(tmp)
        server = await start_dev_server(db_filename=str(folder / "temporal.db"))
        try:
            results = []
            for name in args.scenarios.split(","):
                print(f"{name} on {args.dialect}: {args.turns} turns", flush=True)
                result = await run_scenario(name, args.dialect, server.address, args.turns, folder)
                print(
                    f"  latency median {result['latency_ms_median']} ms, history/turn "
                    f"{result['history_bytes_per_turn_median']} B, blob bytes/turn "
                    f"{result['blob_bytes_per_turn_median']} B",
                    flush=True,
                )
                results.append(result)
        finally:
            server.stop()
    document = {
        "benchmark": "bench/large_values.py",
        "command": f"python -m bench.large_values --dialect {args.dialect} --turns {args.turns}",
        "machine": {"python": platform.python_version(), "cpus": _cpus()},
        "results": results,
    }
    out.write_text(json.dumps(document, indent=1) + "\n")
    plot(results, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialect", default="sqlite", choices=["sqlite", "postgresql", "mysql"])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--plot-only", action="store_true")
    args = parser.parse_args()
    if args.plot_only:
        for path in sorted(RESULTS.glob("statecore_*.json")):
            plot(json.loads(path.read_text())["results"], path.with_suffix(".png"))
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
