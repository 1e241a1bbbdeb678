"""The turn benchmark's results as the Markdown tables bench/README.md shows.

    .venv/bin/python -m bench.turn_tables bench/results/turns_run{1,2}.json

Per phase: each scenario of each run (mean with its interval, percentiles, CPU per turn by
process), then every ratio to its floor in both runs with their difference, then the targets.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.compare_runs import compare

PHASE_TITLES = {"single_session": "1 session", "concurrent": "50 concurrent sessions"}


def _ci(block: dict[str, Any], digits: int) -> str:
    low, high = block["ci95"]
    return f"{block['value']:,.{digits}f} ({low:,.{digits}f}-{high:,.{digits}f})"


def scenario_table(result: dict[str, Any], phase: str) -> list[str]:
    out = [
        "| scenario | mean ms (95% CI) | p50 | p90 | p99 | CPU ms/turn (95% CI) | worker "
        "| Temporal server | PostgreSQL |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, st in result[phase]["scenarios"].items():
        if "skipped" in st:
            out.append(f"| {name} | skipped: {st['skipped']} |||||||| ")
            continue
        cpu = st["cpu_ms_per_turn"]
        digits = 1 if st["p50_ms"] < 100 else 0
        out.append(
            f"| {name} | {_ci(st['mean_ms'], digits)} | {st['p50_ms']:,.{digits}f} "
            f"| {st['p90_ms']:,.{digits}f} | {st['p99_ms']:,.{digits}f} "
            f"| {_ci(cpu['total'], 1)} | {cpu['worker']:.1f} | {cpu['temporal_server']:.1f} "
            f"| {cpu['postgresql']:.1f} |"
        )
    return out


def ratio_table(runs: list[dict[str, Any]], phase: str, tolerance: float) -> list[str]:
    rows = {(r["phase"], r["ratio"], r["measure"]): r for r in compare(runs[0], runs[1], tolerance)}
    out = [
        "| ratio | latency (mean), run 1 | run 2 | diff | CPU per turn, run 1 | run 2 | diff |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key in runs[0][phase]["ratios"]:
        cells = [key]
        for measure in ("latency_mean", "cpu_per_turn"):
            row = rows[(phase, key, measure)]
            ci1 = {"value": row["run1"], "ci95": row["run1_ci95"]}
            ci2 = {"value": row["run2"], "ci95": row["run2_ci95"]}
            diff = f"{row['difference_pct']:+.1f}%"
            if not row["within_tolerance"]:
                diff = f"**{diff}**"
            cells += [_ci(ci1, 3), _ci(ci2, 3), diff]
        out.append("| " + " | ".join(cells) + " |")
    return out


def target_table(runs: list[dict[str, Any]]) -> list[str]:
    out = [
        "| target | run 1 | run 2 |",
        "|---|---:|---:|",
    ]
    for first, second in zip(runs[0]["targets"], runs[1]["targets"], strict=True):
        label = (
            f"{PHASE_TITLES[first['phase']]}: {first['scenario']} / {first['floor']} "
            f"<= {first['target']}"
        )
        cells = [label]
        for t in (first, second):
            ratio = t.get("latency_mean_ratio")
            cells.append(f"{_ci(ratio, 3)}: {t['status']}" if ratio else t["status"])
        out.append("| " + " | ".join(cells) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("first", type=Path)
    p.add_argument("second", type=Path)
    p.add_argument("--tolerance", type=float, default=0.05)
    a = p.parse_args(argv)
    runs = [json.loads(path.read_text()) for path in (a.first, a.second)]
    lines: list[str] = []
    for phase, title in PHASE_TITLES.items():
        for i, run in enumerate(runs, 1):
            lines += [f"**{title}, run {i}**", "", *scenario_table(run, phase), ""]
        lines += [f"**{title}: ratios to the floor**", "", *ratio_table(runs, phase, a.tolerance)]
        lines.append("")
    lines += ["**Targets (ratio of mean latency to the floor)**", "", *target_table(runs), ""]
    for i, run in enumerate(runs, 1):
        machine = run["machine"]
        load = machine.get("loadavg_1min_at_round_ends", {})
        lines.append(
            f"Run {i}: {machine['date']}, commit `{machine['git_commit']}`, "
            f"{run['elapsed_seconds'] / 60:.1f} min; 1-minute load average at the rounds' ends "
            f"{load.get('min')}-{load.get('max')} (mean {load.get('mean')}), "
            f"{machine['cpu_count']} CPUs."
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
