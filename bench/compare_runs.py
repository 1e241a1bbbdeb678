"""Do two runs of the turn benchmark agree? Each ratio to the floor, in both runs, and how far
apart they are.

    cd bench/results
    ../../.venv/bin/python ../compare_runs.py turns_run1.json turns_run2.json

A ratio agrees when the second run's value is within ``--tolerance`` (default 5%) of the
first's. Prints a table and, with ``--out``, writes it as JSON; exits 1 when a ratio does not
agree, or when either file is a smoke test (whose numbers are not results).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

PHASES = ("single_session", "concurrent")
MEASURES = ("latency_mean", "cpu_per_turn")


def compare(a: dict[str, Any], b: dict[str, Any], tolerance: float) -> list[dict[str, Any]]:
    """One row per phase, ratio and measure found in both runs."""
    rows: list[dict[str, Any]] = []
    for phase in PHASES:
        ratios_a, ratios_b = a[phase]["ratios"], b[phase]["ratios"]
        for key in ratios_a:
            if key not in ratios_b:
                continue
            for measure in MEASURES:
                first = ratios_a[key][measure]["value"]
                second = ratios_b[key][measure]["value"]
                difference = second / first - 1
                rows.append(
                    {
                        "phase": phase,
                        "ratio": key,
                        "measure": measure,
                        "run1": first,
                        "run1_ci95": ratios_a[key][measure]["ci95"],
                        "run2": second,
                        "run2_ci95": ratios_b[key][measure]["ci95"],
                        "difference_pct": round(difference * 100, 1),
                        "within_tolerance": abs(difference) <= tolerance,
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("first", type=Path)
    p.add_argument("second", type=Path)
    p.add_argument("--tolerance", type=float, default=0.05, help="relative (default 0.05)")
    p.add_argument("--out", type=Path, help="write the comparison as JSON")
    a = p.parse_args(argv)
    runs = [json.loads(path.read_text()) for path in (a.first, a.second)]
    smoke = [str(path) for path, run in zip((a.first, a.second), runs, strict=True) if run["smoke"]]
    rows = compare(runs[0], runs[1], a.tolerance)
    limit = f"{a.tolerance * 100:g}%"
    print(f"{'phase':15} {'ratio':41} {'measure':13} {'run 1':>7} {'run 2':>7} {'diff':>7}")
    for row in rows:
        flag = "" if row["within_tolerance"] else f"  OUTSIDE +-{limit}"
        print(
            f"{row['phase']:15} {row['ratio']:41} {row['measure']:13} {row['run1']:7.3f} "
            f"{row['run2']:7.3f} {row['difference_pct']:+6.1f}%{flag}"
        )
    outside = [r for r in rows if not r["within_tolerance"]]
    print(f"\n{len(rows) - len(outside)} of {len(rows)} ratios within +-{limit}")
    for path in smoke:
        print(f"{path} is a smoke test: its numbers are not results")
    if a.out:
        a.out.write_text(
            json.dumps(
                {
                    "runs": [str(a.first), str(a.second)],
                    "tolerance": a.tolerance,
                    "within_tolerance": len(rows) - len(outside),
                    "compared": len(rows),
                    "rows": rows,
                },
                indent=2,
            )
            + "\n"
        )
    return 1 if outside or smoke else 0


if __name__ == "__main__":
    sys.exit(main())
