"""The storage benchmark's figure: per database, the latency distributions of append and
context assembly at both sizes, and of KV put/get through the contract and by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on a server

import matplotlib.pyplot as plt  # the backend must be chosen first

#: Outliers from other people's work on a shared machine would squash the boxes.
_CLIP_AT_P99 = 1.6


def _boxes(
    ax: Any, groups: list[tuple[str, list[float], dict[str, Any]]], title: str, note: str
) -> None:
    """Box plots (whiskers p1-p99) of each group's samples, labelled with its p50/p99."""
    labels = [label for label, _, _ in groups]
    ax.boxplot(
        [values for _, values, _ in groups],
        whis=(1, 99),
        showfliers=True,
        flierprops={"markersize": 2},
    )
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=8)
    for x, (_, _, stats) in enumerate(groups, start=1):
        ax.annotate(
            f"p50 {stats['p50_ms']:.2f}\np99 {stats['p99_ms']:.2f}",
            (x, stats["p50_ms"]),
            xytext=(14, 0),
            textcoords="offset points",
            fontsize=7,
            va="center",
        )
    top = max(stats["p99_ms"] for _, _, stats in groups) * _CLIP_AT_P99
    ax.set_ylim(0, top * 1.25)  # headroom for the note
    ax.set_ylabel(f"ms per operation (clipped at {_CLIP_AT_P99}x the highest p99)", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.text(0.02, 0.97, note, transform=ax.transAxes, fontsize=8, va="top")


def plot_store(result: dict[str, Any], samples: dict[str, Any], path: Path) -> None:
    """One row per database that ran: append, context assembly, KV."""
    ran = [d for d, block in result["dialects"].items() if "skipped" not in block]
    fig, axes = plt.subplots(max(1, len(ran)), 3, figsize=(14, 4.6 * max(1, len(ran))))
    rows = axes if len(ran) > 1 else [axes]
    for row, dialect in zip(rows, ran, strict=False):
        block, data = result["dialects"][dialect], samples[dialect]
        small = block["sessions"]["small"]["messages"]
        large = block["sessions"]["large"]["messages"]
        sizes = [("small", f"{small:,} msgs"), ("large", f"{large:,} msgs")]
        for ax, phase, what in (
            (row[0], "append", "append 1 message (own transaction)"),
            (row[1], "context", "assemble_context, 4,096-token budget"),
        ):
            ph = block[phase]
            _boxes(
                ax,
                [(label, data[phase][name], ph[name]) for name, label in sizes],
                f"{dialect}: {what}",
                f"p50 ratio large/small {ph['p50_ratio']:.2f} (target <= "
                f"{ph['target_p50_ratio']}); p99 ratio {ph['p99_ratio']:.2f}\n"
                f"statements per op: {ph['small']['statements_per_op']} / "
                f"{ph['large']['statements_per_op']}",
            )
        kv = block["kv"]
        _boxes(
            row[2],
            [
                (label, data["kv"][name], kv[name])
                for name, label in (
                    ("api_put", "put\ncontract"),
                    ("raw_put", "put\nhand SQL"),
                    ("api_get", "get\ncontract"),
                    ("raw_get", "get\nhand SQL"),
                )
            ],
            f"{dialect}: KV through the contract vs hand-written SQL",
            f"p50 ratio contract/hand: put {kv['put_p50_ratio_api_to_raw']:.2f}, "
            f"get {kv['get_p50_ratio_api_to_raw']:.2f}",
        )
    machine = result["machine"]
    fig.suptitle(
        f"statecore storage benchmark ({result['mode']}) - {machine['cpu_count']} CPUs, "
        f"load {machine['loadavg_start'][0]:.1f} -> {machine['loadavg_end'][0]:.1f}, "
        f"{machine['date'][:10]}; whiskers p1-p99"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
