"""The benchmarks' figures: turn latency per scenario and the long session turn by turn
(``turns.png``), the chaos run's timeline and the load run's throughput and memory over time.

``python -m bench.harness.plot`` redraws them from the committed result JSON."""

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
    long_latency_ms: Sequence[float] = (),
    long_bytes: Sequence[int | None] = (),
    run_starts: Sequence[int] = (),
) -> None:
    """The scenarios' latency and their ratios to the floor (when the run measured them),
    then the long session turn by turn (when it ran one)."""
    rows = (2 if "single_session" in result else 0) + (2 if long_latency_ms else 0)
    fig = plt.figure(figsize=(12, 5 * rows))
    grid = fig.add_gridspec(rows, 2)
    row = 0
    if "single_session" in result:
        _scenario_panels(fig, grid, result)
        for column, group in enumerate(("single_session", "concurrent")):
            _ratios(fig.add_subplot(grid[1, column]), result[group])
        row = 2
    if long_latency_ms:
        _long_latency(fig.add_subplot(grid[row, :]), long_latency_ms, run_starts)
        _long_bytes(fig.add_subplot(grid[row + 1, :]), long_bytes, run_starts)
    fig.suptitle(_title(result))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ratios(ax: Any, block: dict[str, Any]) -> None:
    """Each ratio's geometric mean over the rounds with its 95% interval: latency and CPU."""
    names = list(block["ratios"])
    ys = range(len(names))
    height = 0.38
    for offset, key, label in (
        (-height / 2, "latency_mean", "mean latency"),
        (
            height / 2,
            "cpu_per_turn",
            "CPU per turn",
        ),
    ):
        values = [block["ratios"][n][key]["value"] for n in names]
        lows = [v - block["ratios"][n][key]["ci95"][0] for v, n in zip(values, names, strict=True)]
        highs = [block["ratios"][n][key]["ci95"][1] - v for v, n in zip(values, names, strict=True)]
        ax.barh(
            [y + offset for y in ys],
            values,
            height,
            xerr=[lows, highs],
            capsize=2,
            label=label,
        )
        for y, v in zip(ys, values, strict=True):
            ax.text(v, y + offset, f" {v:.2f}", va="center", fontsize=7)
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([n.replace("/", "\n/ ") for n in names], fontsize=7)
    ax.invert_yaxis()
    sessions = "1 session" if block["sessions"] == 1 else f"{block['sessions']} sessions"
    ax.set_title(
        f"{sessions}: ratio to the floor (geometric mean of rounds, 95% interval)", fontsize=10
    )
    ax.legend(loc="lower right", fontsize=8)


def _title(result: dict[str, Any]) -> str:
    machine = result["machine"]
    mode = "SMOKE TEST, not a result" if result.get("smoke") else result["mode"]
    return (
        f"statecore turn benchmark ({mode}) - {machine['cpu_count']} CPUs, "
        f"temporalio {machine['temporalio']}, {machine['date'][:10]}"
    )


def _scenario_panels(fig: Any, grid: Any, result: dict[str, Any]) -> None:
    """1 session and N concurrent sessions side by side, each on its own scale: ~50 ms and
    ~1,000 ms on one axis would hide the ratios that matter (agent against floor)."""
    for column, group in enumerate(("single_session", "concurrent")):
        _scenarios(fig.add_subplot(grid[0, column]), result, group)


def _scenarios(ax: Any, result: dict[str, Any], group: str) -> None:
    block = result[group]
    labels: list[str] = []
    p50: list[float] = []
    p99: list[float] = []
    for name, stats in block["scenarios"].items():
        if "p50_ms" not in stats:
            continue
        labels.append(name.replace("_", "\n", 1))
        p50.append(stats["p50_ms"])
        p99.append(stats["p99_ms"])
    floor = block["scenarios"].get("floor_activity", {}).get("p50_ms")
    xs = range(len(labels))
    width = 0.4
    ax.bar([x - width / 2 for x in xs], p50, width, label="p50")
    ax.bar([x + width / 2 for x in xs], p99, width, label="p99")
    for x, (a, b) in enumerate(zip(p50, p99, strict=True)):
        ax.text(x - width / 2, a, f"{a:.0f}", ha="center", va="bottom", fontsize=8)
        ax.text(x + width / 2, b, f"{b:.0f}", ha="center", va="bottom", fontsize=8)
    if floor:
        for x, value in enumerate(p50):
            ax.text(
                x - width / 2,
                value / 2,
                f"{value / floor:.2f}x",
                ha="center",
                va="center",
                fontsize=8,
                color="white",
                rotation=90,
            )
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("turn latency (ms)")
    sessions = (
        "1 session" if group == "single_session" else f"{block['sessions']} concurrent sessions"
    )
    ax.set_title(f"{sessions}: turn latency (white: p50 / floor_activity p50)", fontsize=10)
    ax.legend(loc="upper left")


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
    _label_summarize_band(ax, turns, values)
    ax.set_xlabel("turn (spikes: the first turn of a run also carries the run's start)")
    ax.set_ylabel("workflow history bytes")
    ax.set_title("Long session: workflow history bytes per turn")


#: What the upper band of the bytes panel is: turns whose window passed the profile's
#: summarization threshold (3,000 tokens) also ran the automatic summarize compaction, a
#: local activity whose MARKER_RECORDED event adds ~1.8 KB (every ~34 turns of the offline
#: model's ~90-token exchanges; seen in the event types of those turns' history).
SUMMARIZE_BAND = (
    "upper band: turns that also ran the automatic summarization (window over the\n"
    "3,000-token threshold): one local-activity marker event, ~1.8 KB more"
)


def _label_summarize_band(ax: Any, turns: Sequence[int], values: Sequence[int]) -> None:
    if not values:
        return
    base = sorted(values)[len(values) // 2]
    band = [(t, v) for t, v in zip(turns, values, strict=True) if 1.3 * base < v < 1.9 * base]
    if not band:
        return
    level = sorted(v for _, v in band)[len(band) // 2]
    ax.annotate(
        SUMMARIZE_BAND + f" ({len(band)} of {len(values)} turns)",
        xy=(band[len(band) // 2][0], level),
        xytext=(0.35, 0.9),
        textcoords="axes fraction",
        fontsize=8,
        arrowprops={"arrowstyle": "->", "color": "grey"},
    )
    ax.text(
        0.99,
        base / ax.get_ylim()[1] - 0.06,
        "every other turn",
        transform=ax.transAxes,
        ha="right",
        fontsize=8,
    )


# --- the committed turns figure, redrawn ---------------------------------------------------------


def replot_turns(result: dict[str, Any], previous_png: Path, path: Path) -> None:
    """``turns.png`` from ``turns.json`` alone: the scenario panels are drawn from it; the
    long-session panels need the per-turn series, which the JSON does not hold, so they are
    kept from the figure the run drew (``previous_png``) and the band is labelled on them."""
    import matplotlib.image as mpimg

    old = mpimg.imread(previous_png)
    height = old.shape[0]
    # The run's figure (3 rows, 13 in high at 110 dpi): the long-session rows are its
    # lower two thirds, below the scenario panel's tick labels.
    long_rows = old[int(height * 0.355) :, :, :]
    fig = plt.figure(figsize=(12, 16))
    grid = fig.add_gridspec(2, 2, height_ratios=[1, 2.2])
    _scenario_panels(fig, grid, result)
    ax = fig.add_subplot(grid[1, :])
    ax.imshow(long_rows)
    ax.set_axis_off()
    rows = long_rows.shape[0]
    ax.annotate(
        SUMMARIZE_BAND,
        xy=(0.62 * long_rows.shape[1], 0.624 * rows),
        xytext=(0.25 * long_rows.shape[1], 0.585 * rows),
        fontsize=9,
        color="C3",
        arrowprops={"arrowstyle": "->", "color": "C3"},
    )
    ax.set_title(
        "Long session, 10,000 turns (panels as drawn by the run; the JSON keeps no per-turn "
        "series)",
        fontsize=10,
    )
    fig.suptitle(_title(result))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- chaos and load over time -------------------------------------------------------------------

_EVENT_COLOURS = {"worker SIGKILL": "C3", "Temporal restart": "C1", "PostgreSQL outage": "C4"}


def plot_chaos_timeline(result: dict[str, Any], path: Path) -> None:
    """Completed turns against time, with every kill, restart and outage marked on it."""
    timeline = result["timeline"]
    done = timeline["turn_completed_seconds"]
    fig, ax = plt.subplots(figsize=(12, 5))
    ax.plot(
        done, range(1, len(done) + 1), color="C0", drawstyle="steps-post", label="turns completed"
    )
    seen: set[str] = set()
    for event in timeline["events"]:
        kind = event["kind"]
        label = None if kind in seen else kind
        seen.add(kind)
        colour = _EVENT_COLOURS.get(kind, "grey")
        if kind == "worker SIGKILL":
            ax.axvline(event["at_seconds"], color=colour, alpha=0.6, linewidth=1, label=label)
        else:
            start = event["at_seconds"]
            ax.axvspan(
                start, start + event["lasted_seconds"], color=colour, alpha=0.25, label=label
            )
    figures, plan = result["figures"], result["plan"]
    ax.set_xlabel("seconds since the start of the run")
    ax.set_ylabel("turns completed (all sessions)")
    ax.set_title(
        f"Chaos: {plan['sessions']} sessions x {plan['turns']} turns, "
        f"{figures['worker_kills']} kills, {figures['server_restarts']} Temporal restarts, "
        f"{figures['db_outages']} PostgreSQL outages: lost {figures['lost']}, "
        f"duplicated {figures['duplicated']}\n{result['command']}",
        fontsize=10,
    )
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_load_timeline(result: dict[str, Any], path: Path, *, bucket: float = 2.0) -> None:
    """Turns answered per second and the worker's resident memory over the load run."""
    timeline = result["timeline"]
    done = timeline["turn_completed_seconds"]
    rss = timeline["worker_rss_mib"]
    end = max([*done, *(t for t, _ in rss), bucket])
    buckets = int(end // bucket) + 1
    counts = [0] * buckets
    for t in done:
        counts[int(t // bucket)] += 1
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
    top.bar(
        [i * bucket for i in range(buckets)],
        [c / bucket for c in counts],
        width=bucket,
        align="edge",
        color="C0",
    )
    top.axhline(
        result["turns_per_second"],
        color="C1",
        linestyle="--",
        label=f"mean {result['turns_per_second']} turns/s",
    )
    top.set_ylabel(f"turns answered per second ({bucket:g} s buckets)")
    top.legend(loc="upper right")
    settings = result["settings"]
    top.set_title(
        f"Load: {settings['sessions']} sessions x "
        f"{settings['turns_per_session']} turns against one worker; "
        f"{result['turns_answered']}/{result['turns_planned']} answered, "
        f"{result['client_errors']} errors; load average {result['machine']['loadavg_start'][0]} "
        f"on {result['machine']['cpu_count']} CPUs at start\n{result['command']}",
        fontsize=10,
    )
    bottom.plot([t for t, _ in rss], [m for _, m in rss], color="C2")
    bottom.set_ylabel("worker resident memory (MiB)")
    bottom.set_xlabel("seconds since the load started")
    bottom.set_ylim(0, max((m for _, m in rss), default=1) * 1.2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """Redraw the committed figures from the committed results (into ``--out``, by default
    beside them)."""
    import argparse
    import json

    results = Path(__file__).resolve().parents[1] / "results"
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--out", type=Path, default=results, help="folder for the figures")
    out = p.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    turns = json.loads((results / "turns.json").read_text())
    replot_turns(turns, results / "turns-run.png", out / "turns.png")
    for name, draw in (("chaos-quick", plot_chaos_timeline), ("load-short", plot_load_timeline)):
        source = results / f"{name}.json"
        if source.exists():
            draw(json.loads(source.read_text()), out / f"{name}-timeline.png")


if __name__ == "__main__":
    main()
