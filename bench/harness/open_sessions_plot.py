"""The open-sessions benchmark's figure: cached against uncached turn latency per run, the
uncached turn against the turns already in its run, and the worker's memory against the
sessions opened and cached.

    .venv/bin/python -m bench.harness.open_sessions_plot bench/results/open_sessions_*.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on a server

import matplotlib.pyplot as plt  # the backend must be chosen first


def label(result: dict[str, Any]) -> str:
    s = result["settings"]
    idle = f"idle continue {s['idle_continue']} s" if s["idle_continue"] else "no idle continue"
    return f"{s['db']}, {idle}"


def plot_open_sessions(results: list[dict[str, Any]], path: Path) -> None:
    fig, (lat, probe, mem) = plt.subplots(1, 3, figsize=(18, 6))
    width = 0.8 / max(len(results), 1)
    kinds = [
        ("hot", "all", "cached (hot)"),
        ("sweep", "all", "uncached (sweep)"),
        ("uniform", "all", "uniform"),
        ("skewed", "all", "skewed"),
    ]
    for i, result in enumerate(results):
        phases = {p["phase"]: p for p in result["phases"]}
        xs = [k + i * width for k in range(len(kinds))]
        p50 = [phases[name][key].get("p50_ms", 0) for name, key, _ in kinds]
        p90 = [phases[name][key].get("p90_ms", 0) for name, key, _ in kinds]
        lat.bar(xs, p90, width, color=f"C{i}", alpha=0.35)
        lat.bar(xs, p50, width, color=f"C{i}", label=label(result))
        for after, style, what in (("sweep", "o-", "uncached"), ("skewed", "s--", "cached")):
            rows = [r for r in result["probes"] if r["after"] == after]
            probe.plot(
                [r["turns_built"] for r in rows],
                [r["latency_ms"] for r in rows],
                style,
                color=f"C{i}",
                label=f"{label(result)}: {what} (after the {after} phase)",
            )
        timeline = result["memory_timeline"]["rows"]
        mem.plot(
            [r[1] for r in timeline],
            [r[3] for r in timeline],
            ".",
            color=f"C{i}",
            markersize=3,
            label=f"{label(result)}: RSS against sessions opened",
        )
    lat.set_xticks([k + width * (len(results) - 1) / 2 for k in range(len(kinds))])
    lat.set_xticklabels([k[2] for k in kinds])
    lat.set_ylabel("turn latency, ms (solid p50, light p90)")
    lat.legend(fontsize=8)
    probe.set_xscale("log")
    probe.set_xlabel("turns in the session's run when it went idle")
    probe.set_ylabel("latency of its next turn, ms")
    probe.set_yscale("log")
    probe.legend(fontsize=8)
    mem.set_xlabel("sessions opened so far")
    mem.set_ylabel("worker RSS, MiB")
    mem.legend(fontsize=8)
    smoke = any(r.get("smoke") for r in results)
    fig.suptitle(
        ("SMOKE TEST - " if smoke else "") + "Open sessions on one worker "
        f"(cache {results[0]['settings']['cache']} workflows, "
        f"{results[0]['settings']['sessions']} sessions)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """Draw ``open_sessions.png`` beside the first of the given open-sessions results."""
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("results", nargs="+", type=Path, help="open_sessions_*.json")
    paths = p.parse_args(argv).results
    plot_open_sessions(
        [json.loads(p.read_text()) for p in paths], paths[0].with_name("open_sessions.png")
    )


if __name__ == "__main__":
    main()
