"""Temporal's official integrations with statecore's storage driver: the side-by-side
scenario's official side (bench/openai_agents_side_by_side.py, bench/langgraph_side_by_side.py)
run again with ``StatecoreBlobPlugin`` added to its client, so every payload of 256 KiB or more
(each model call's input, once the conversation is that long) is stored in statecore's
database and history keeps a claim.

    .venv/bin/python -m bench.official_blobs --integration langgraph --turns 1000
    .venv/bin/python -m bench.official_blobs --integration langgraph --turns 1000 --threshold 16384
    .venv/bin/python -m bench.official_blobs --integration openai-agents --turns 1000 --minutes 40
    .venv/bin/python -m bench.official_blobs --plot-only

The integration runs in its own environment with the driver's packages added
(``bench/harness/official_venv.py``, ``with_blob_driver``), against a fresh dev server (SQLite file)
and a SQLite blob database. "Without the driver" is the committed side-by-side result of the
same scenario (``bench/results/<integration>_side_by_side.json``, its official side), not run
again. Writes ``bench/results/large_values/<integration>_with_blobs_<threshold>k.{json,png}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from bench.harness.environment import machine_info
from bench.harness.official_venv import LANGGRAPH, OPENAI_AGENTS, with_blob_driver
from bench.harness.side_by_side_measure import CHECKPOINTS, run_side_a
from statecore.core._limits import DEFAULT_BLOB_THRESHOLD_BYTES
from statecore.store._migrate import upgrade_database
from statecore.temporal._devserver import start_dev_server

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "large_values"
INTEGRATIONS = {
    "langgraph": (LANGGRAPH, "official_langgraph_side", "langgraph_side_by_side.json"),
    "openai-agents": (OPENAI_AGENTS, "official_agents_side", "openai_agents_side_by_side.json"),
}
#: Slack on top of ``--minutes`` before the official side counts as stuck.
SLACK_SECONDS = 900
CHECKPOINTS_WITH_BLOBS = (*CHECKPOINTS, 500, 1000)


def _summary(side: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "turns_done",
        "stopped_by",
        "status",
        "terminated_reason",
        "history_bytes_total",
        "history_bytes_per_turn_at",
        "history_bytes_last_turn",
        "largest_activity_input_bytes",
        "latency",
        "blob_storage",
    )
    return {k: side[k] for k in keep if k in side}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    base, script, committed = INTEGRATIONS[args.integration]
    environment = with_blob_driver(base)
    print(f"environment: {environment.folder}", flush=True)
    python = environment.build()
    with TemporaryDirectory(prefix="official-blobs-") as tmp:
        folder = Path(tmp)
        url = f"sqlite+aiosqlite:///{folder / 'blobs.db'}"
        await upgrade_database(url)
        server = await start_dev_server(db_filename=str(folder / "temporal.db"))
        try:
            out = folder / "official.json"
            cmd = [
                str(python),
                "-m", f"bench.harness.{script}",
                "--address", server.address,
                "--turns", str(args.turns),
                "--checkpoints", ",".join(str(c) for c in CHECKPOINTS_WITH_BLOBS),
                "--out", str(out),
                "--blob-database-url", url,
                "--blob-threshold", str(args.threshold),
            ]  # fmt: skip
            env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
            timeout = (args.minutes or 180) * 60 + SLACK_SECONDS
            if args.integration == "openai-agents":
                from bench.openai_agents_side_by_side import model_server

                with model_server(folder) as model_url:
                    cmd += ["--model-url", model_url]
                    if args.minutes is not None:
                        cmd += ["--minutes", str(args.minutes)]
                    side = await asyncio.to_thread(run_side_a, cmd, env, out, timeout)
            else:
                if args.minutes is not None:
                    cmd += ["--minutes", str(args.minutes)]
                side = await asyncio.to_thread(run_side_a, cmd, env, out, timeout)
        finally:
            server.stop()
    without = json.loads((ROOT / "bench" / "results" / committed).read_text())["sides"]["official"]
    turns = max(side["turns_done"], 1)
    storage = side.get("blob_storage", {})
    return {
        "benchmark": "bench/official_blobs.py",
        "command": f"python -m bench.official_blobs --integration {args.integration} "
        f"--turns {args.turns} --threshold {args.threshold}"
        + (f" --minutes {args.minutes}" if args.minutes else ""),
        "machine": machine_info(),
        "settings": {
            "turns": args.turns,
            "threshold_bytes": args.threshold,
            "pins": list(environment.requirements()),
        },
        "with_driver": side,
        "with_driver_sql_bytes_per_turn": round(storage.get("stored_bytes", 0) / turns),
        "without_driver": {"source": f"bench/results/{committed}", **_summary(without)},
        "without_driver_series": without.get("series", {}),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    sides = (
        ("without the driver (committed run)", result["without_driver_series"]),
        ("with statecore's driver", result["with_driver"].get("series", {})),
    )
    for label, series in sides:
        per_turn = series.get("history_bytes_per_turn") or []
        cumulative = series.get("history_bytes_cumulative") or []
        xs = range(1, len(per_turn) + 1)
        axes[0].plot(xs, [v or 0 for v in per_turn], label=label)
        axes[1].plot(range(1, len(cumulative) + 1), [v / 1e6 for v in cumulative], label=label)
    latency = result["with_driver"].get("latency_ms_series", [])
    axes[2].plot(range(1, len(latency) + 1), latency, label="with statecore's driver")
    axes[1].axhline(50, color="red", linestyle="--", linewidth=0.8, label="50 MB history limit")
    axes[0].set(title="history bytes per turn", xlabel="turn", ylabel="bytes")
    axes[1].set(title="history, cumulative", xlabel="turn", ylabel="MB")
    axes[2].set(title="turn latency with the driver", xlabel="turn", ylabel="ms")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{result['command']}: Temporal's official integration, history by reference")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--integration", choices=list(INTEGRATIONS), default="langgraph")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--minutes", type=float, help="stop sending turns after this long")
    parser.add_argument("--threshold", type=int, default=DEFAULT_BLOB_THRESHOLD_BYTES)
    parser.add_argument("--plot-only", action="store_true")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        for path in sorted(RESULTS.glob("*_with_blobs_*.json")):
            plot(json.loads(path.read_text()), path.with_suffix(".png"))
        return
    result = asyncio.run(run(args))
    name = args.integration.replace("-", "_")
    out = RESULTS / f"{name}_with_blobs_{args.threshold // 1024}k.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out.with_suffix(".png"))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
