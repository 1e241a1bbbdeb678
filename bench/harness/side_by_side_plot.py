"""The side-by-side benchmark's figure: history per turn, history in total, turn latency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on a server

import matplotlib.pyplot as plt  # the backend must be chosen first

from bench.harness.plot import rolling_median

#: The server's limits (Temporal server defaults) drawn on the figure.
HISTORY_LIMIT_BYTES = 50 * 1024 * 1024
_COLORS = {"official": "tab:red", "statecore": "tab:blue"}
_NAMES = {"official": "(a) temporalio-openai-agents", "statecore": "(b) statecore"}


def plot_side_by_side(
    result: dict[str, Any],
    path: Path,
    *,
    title: str = "OpenAI Agents side by side",
    names: dict[str, str] | None = None,
) -> None:
    """The figure of ``result``; ``names`` labels the sides (official, statecore)."""
    names = {**_NAMES, **(names or {})}
    fig, axes = plt.subplots(3, 1, figsize=(11, 13))
    per_turn, total, latency = axes
    for name, side in result["sides"].items():
        if "skipped" in side:
            continue
        color, label = _COLORS[name], names[name]
        series = side["series"]
        turns = range(1, len(series["history_bytes_per_turn"]) + 1)
        per_turn.plot(
            turns, [b or 0 for b in series["history_bytes_per_turn"]], color=color, label=label
        )
        total.plot(
            turns,
            [b / 1024 / 1024 for b in series["history_bytes_cumulative"]],
            color=color,
            label=label,
        )
        ms = side["latency_ms_series"]
        latency.plot(range(1, len(ms) + 1), ms, color=color, alpha=0.25, linewidth=0.8)
        latency.plot(
            range(1, len(ms) + 1),
            rolling_median(ms, 15),
            color=color,
            label=f"{label} (median of 15)",
        )
        if side.get("stopped_by"):
            for ax in axes:
                ax.axvline(len(ms) + 1, color=color, linestyle=":", linewidth=1)
    per_turn.set_yscale("log")
    per_turn.set_ylabel("history bytes added by the turn")
    per_turn.set_title("Workflow history per turn (events of the turn's update, serialized)")
    if _largest_total(result) > HISTORY_LIMIT_BYTES / 10:  # a line far above the data hides it
        total.axhline(HISTORY_LIMIT_BYTES / 1024 / 1024, color="gray", linestyle="--",
                      label="server history limit (50 MiB)")  # fmt: skip
    total.set_ylabel("MiB")
    total.set_title("Workflow history in total (all runs)")
    latency.set_yscale("log")
    latency.set_ylabel("ms")
    latency.set_title("Turn latency as the caller sees it")
    for ax in axes:
        ax.set_xlabel("turn")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    machine = result["machine"]
    fig.suptitle(
        f"{title} ({result['mode']}) - {machine['cpu_count']} CPUs, "
        f"temporalio {machine['temporalio']}, {machine['date'][:10]}"
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _largest_total(result: dict[str, Any]) -> int:
    return max(
        (max(s["series"]["history_bytes_cumulative"], default=0) for s in result["sides"].values()
         if "series" in s),
        default=0,
    )  # fmt: skip
