"""The turn benchmark's figure: latency per scenario, and the long session turn by turn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on a server

import matplotlib.pyplot as plt  # the backend must be chosen first


def rolling_median(values: Sequence[float], width: int) -> list[float]:
    out: list[float] = []
    for i in range(len(values)):
        window = sorted(values[max(0, i - width + 1) : i + 1])
        out.append(window[len(window) // 2])
    return out


def plot_turns(
    result: dict[str, Any],
    path: Path,
    *,
    long_latency_ms: Sequence[float],
    long_bytes: Sequence[int | None],
    run_starts: Sequence[int],
) -> None:
    fig, axes = plt.subplots(3, 1, figsize=(11, 13))
    _scenarios(axes[0], result)
    _long_latency(axes[1], long_latency_ms, run_starts)
    _long_bytes(axes[2], long_bytes, run_starts)
    machine = result["machine"]
    fig.suptitle(
        f"statecore turn benchmark ({result['mode']}) - {machine['cpu_count']} CPUs, "
        f"temporalio {machine['temporalio']}, {machine['date'][:10]}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _scenarios(ax: Any, result: dict[str, Any]) -> None:
    labels: list[str] = []
    p50: list[float] = []
    p99: list[float] = []
    for group, title in (("single_session", "1 session"), ("concurrent", "concurrent")):
        block = result[group]
        for name, stats in block["scenarios"].items():
            if "p50_ms" not in stats:
                continue
            sessions = "" if group == "single_session" else f" x{block['sessions']}"
            labels.append(f"{name}\n{title}{sessions}")
            p50.append(stats["p50_ms"])
            p99.append(stats["p99_ms"])
    xs = range(len(labels))
    width = 0.4
    ax.bar([x - width / 2 for x in xs], p50, width, label="p50")
    ax.bar([x + width / 2 for x in xs], p99, width, label="p99")
    for x, (a, b) in enumerate(zip(p50, p99, strict=True)):
        ax.text(x - width / 2, a, f"{a:.0f}", ha="center", va="bottom", fontsize=8)
        ax.text(x + width / 2, b, f"{b:.0f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=6)  # ten groups: the longest name must fit its slot
    ax.set_ylabel("turn latency (ms)")
    ax.set_title("Latency per turn, as the caller sees it (update-with-start)")
    ax.legend()


def _mark_runs(ax: Any, run_starts: Sequence[int]) -> None:
    for start in run_starts[1:]:
        ax.axvline(start, color="grey", alpha=0.25, linewidth=0.8)


def _long_latency(ax: Any, latency_ms: Sequence[float], run_starts: Sequence[int]) -> None:
    turns = range(1, len(latency_ms) + 1)
    ax.scatter(turns, latency_ms, s=2, alpha=0.25, label="turn")
    width = max(5, min(100, len(latency_ms) // 20))
    ax.plot(turns, rolling_median(latency_ms, width), color="C1", label=f"median of {width}")
    _mark_runs(ax, run_starts)
    if latency_ms:
        ordered = sorted(latency_ms)
        ax.set_ylim(0, ordered[int(len(ordered) * 0.995) - 1] * 1.2)
    ax.set_xlabel("turn (grey lines: a new run after continue-as-new)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"Long session: latency per turn over {len(latency_ms)} turns")
    ax.legend(loc="upper right")


def _long_bytes(ax: Any, per_turn: Sequence[int | None], run_starts: Sequence[int]) -> None:
    turns = [i + 1 for i, b in enumerate(per_turn) if b is not None]
    values = [b for b in per_turn if b is not None]
    ax.scatter(turns, values, s=2, alpha=0.4)
    _mark_runs(ax, run_starts)
    if values:
        ordered = sorted(values)
        ax.set_ylim(0, ordered[int(len(ordered) * 0.99) - 1] * 1.3)
    ax.set_xlabel("turn (spikes: the first turn of a run also carries the run's start)")
    ax.set_ylabel("workflow history bytes")
    ax.set_title("Long session: workflow history bytes per turn")
