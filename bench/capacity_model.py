"""One million open sessions and 100 turns a second: workers, cache and database sizes from the
measured per-turn costs, with a simulation of which turns find their session cached.

    .venv/bin/python -m bench.capacity_model            # bench/results/capacity_model.json

Measured inputs (read from the committed results, never typed in): the worker's CPU for a
cached turn and the dev server's and PostgreSQL's CPU per turn (``open_sessions_postgresql_*``,
phase ``hot``), the replay cost per turn in a run (``replay_cost.json``), the worker's RSS per
cached workflow (``open_sessions_*``'s memory timeline) and the database's bytes per session and
per message.

The simulation: sessions start conversations at random (Poisson, together 100 turns/s); a
conversation is a geometric number of turns (mean ``--turns-per-conversation``) separated by
exponential think times (mean ``--think-seconds``). Every worker's cache is LRU; a session
stays on the worker that ran it last (Temporal's sticky queue), so the workers' caches together
behave as one LRU of workers x cache entries. Each turn is cached or not; an uncached one
replays its run, whose length is the turns since the run began: since the session's last idle
period of ``--idle-continue`` seconds, or since its last run if that is 0 (capped by the
server's suggestion, ~340 turns), and only once the run holds ``--min-turns`` turns; a
session's first turn in the simulation finds its run anywhere between empty and where it
would move on, as a session open for weeks would).
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
from collections import OrderedDict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
#: Turns in a run when the server suggests continue-as-new (4,096 events, ~12 a turn).
SUGGESTED_RUN_TURNS = 340


def _total_per_turn(result: dict[str, Any], key: str) -> float:
    """CPU ms per turn over every phase of an open-sessions run, background work included."""
    phases = result["phases"]
    turns = sum(p["all"]["turns"] for p in phases)
    return sum(p[key] * p["all"]["turns"] for p in phases) / turns


def measured(db: str) -> dict[str, float]:
    """Per-turn costs from the run without idle continue-as-new (turns alone); the cost of one
    idle continue-as-new from the run with it at 0 minimum events, where every turn was
    followed by one (sessions got a turn every few minutes)."""
    before = json.loads((RESULTS / f"open_sessions_{db}_idle0.json").read_text())
    after = json.loads((RESULTS / f"open_sessions_{db}_idle60.json").read_text())
    replay = json.loads((RESULTS / "replay_cost.json").read_text())
    hot = next(p for p in before["phases"] if p["phase"] == "hot")
    rows = before["memory_timeline"]["rows"]
    full = next(r for r in rows if r[2] >= before["settings"]["cache"])
    small = next(r for r in rows if r[2] > 0)
    # Replay ms per turn in the run, from the 100-turn run (the rate grows past it).
    hundred = next(r for r in replay["rows"] if r["turns_in_run"] == 100)
    database = after.get("database") or before["database"]
    cost: dict[str, float] = {}
    for key in ("worker", "server", "postgresql"):
        k = f"{key}_cpu_ms_per_turn"
        cost[f"{key}_cpu_ms_per_idle_continue"] = round(
            _total_per_turn(after, k) - _total_per_turn(before, k), 2
        )
    return {
        "worker_cpu_ms_cached_turn": hot["worker_cpu_ms_per_turn"],
        "server_cpu_ms_per_turn": hot["server_cpu_ms_per_turn"],
        "postgresql_cpu_ms_per_turn": hot["postgresql_cpu_ms_per_turn"],
        **cost,
        "replay_ms_per_turn_in_run": hundred["replay_ms_per_turn_in_run"],
        "history_bytes_per_turn": round(hundred["history_bytes"] / 100),
        "worker_rss_mib_per_cached_session": round(
            (full[3] - small[3]) / max(full[2] - small[2], 1), 3
        ),
        "worker_rss_mib_base": small[3],
        "database_bytes_per_session": database["bytes_per_session"],
        "database_bytes_per_message": database["bytes_per_message"],
    }


def simulate(a: argparse.Namespace) -> dict[str, Any]:
    """Turn by turn: (cached?, turns in its run) for ``a.turns`` turns in steady state."""
    rng = random.Random(a.seed)
    conversations_per_s = a.rate / a.turns_per_conversation
    cache: OrderedDict[int, None] = OrderedDict()
    capacity = a.workers * a.cache
    last_turn: dict[int, float] = {}
    run_turns: dict[int, int] = {}
    events: list[tuple[float, int, int]] = []  # (time, session, turns left)
    t = 0.0
    cached = uncached = continues = 0
    replayed: list[int] = []
    warmup = a.turns // 5
    done = 0
    next_start = rng.expovariate(conversations_per_s)
    while done < a.turns + warmup:
        if not events or next_start < events[0][0]:
            t = next_start
            next_start += rng.expovariate(conversations_per_s)
            session = rng.randrange(a.sessions)
            left = 1
            while rng.random() > 1 / a.turns_per_conversation:
                left += 1
        else:
            t, session, left = heapq.heappop(events)
        idle = t - last_turn.get(session, -1e18)
        if (
            a.idle_continue
            and idle >= a.idle_continue
            and run_turns.get(session, 0) >= max(1, a.min_turns)
        ):
            run_turns[session] = 0  # the run continued as new while idle
            if done >= warmup:
                continues += 1
        if session not in run_turns:
            # A session open for weeks: its run is anywhere between empty and where it
            # would move on (the server's suggestion, or the idle continue's minimum).
            longest = max(1, a.min_turns) if a.idle_continue else SUGGESTED_RUN_TURNS
            run_turns[session] = rng.randrange(longest)
        run = run_turns[session]
        hit = session in cache
        if hit:
            cache.move_to_end(session)
        else:
            cache[session] = None
            if len(cache) > capacity:
                cache.popitem(last=False)
        if done >= warmup:
            if hit:
                cached += 1
            else:
                uncached += 1
                replayed.append(run)
        run_turns[session] = (run + 1) % SUGGESTED_RUN_TURNS
        last_turn[session] = t
        done += 1
        if left > 1:
            heapq.heappush(events, (t + rng.expovariate(1 / a.think_seconds), session, left - 1))
    replayed.sort()
    n = len(replayed)
    return {
        "turns": cached + uncached,
        "uncached_share": round(uncached / (cached + uncached), 3),
        "idle_continues_per_turn": round(continues / (cached + uncached), 3),
        "uncached_run_turns_p50": replayed[n // 2] if n else 0,
        "uncached_run_turns_p90": replayed[int(n * 0.9)] if n else 0,
        "uncached_run_turns_mean": round(sum(replayed) / n, 1) if n else 0.0,
    }


def plan(a: argparse.Namespace, m: dict[str, float], sim: dict[str, Any]) -> dict[str, Any]:
    replay_ms = sim["uncached_run_turns_mean"] * m["replay_ms_per_turn_in_run"]
    per_continue = sim["idle_continues_per_turn"]
    worker_ms = (
        m["worker_cpu_ms_cached_turn"]
        + sim["uncached_share"] * replay_ms
        + per_continue * m["worker_cpu_ms_per_idle_continue"]
    )
    server_ms = m["server_cpu_ms_per_turn"] + per_continue * m["server_cpu_ms_per_idle_continue"]
    worker_cores = a.rate * worker_ms / 1000
    return {
        "worker_cpu_ms_per_turn_mean": round(worker_ms, 2),
        "worker_cores_busy": round(worker_cores, 2),
        # A worker process runs its workflow code on one core at a time (the GIL); keep it
        # at most 60% busy so a burst does not queue turns.
        "worker_processes_needed": max(1, int(-(-worker_cores // 0.6))),
        "worker_rss_mib_each": round(
            m["worker_rss_mib_base"] + a.cache * m["worker_rss_mib_per_cached_session"] + 27, 0
        ),
        "temporal_server_cores_busy_dev_server_rate": round(a.rate * server_ms / 1000, 2),
        "postgresql_cores_busy": round(a.rate * m["postgresql_cpu_ms_per_turn"] / 1000, 2),
        "history_bytes_per_day": int(a.rate * m["history_bytes_per_turn"] * 86400),
        # The measured database's bytes over its messages: headers, turn records and
        # indexes ride along (measured at ~9 messages a session, so a slight overestimate).
        "statecore_database_bytes": int(
            a.sessions * a.messages_per_session * m["database_bytes_per_message"]
        ),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sessions", type=int, default=1_000_000)
    p.add_argument("--rate", type=float, default=100.0, help="turns per second")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--cache", type=int, default=1000, help="max_cached_workflows per worker")
    p.add_argument("--turns-per-conversation", type=float, default=6.0)
    p.add_argument("--think-seconds", type=float, default=40.0)
    p.add_argument("--messages-per-session", type=int, default=40)
    p.add_argument("--turns", type=int, default=400_000, help="simulated turns")
    p.add_argument(
        "--min-turns", type=int, default=18, help="turns in a run before it may continue"
    )
    p.add_argument("--seed", type=int, default=45)
    p.add_argument("--db", default="postgresql")
    p.add_argument("--out", type=Path, default=RESULTS / "capacity_model.json")
    a = p.parse_args(argv)
    m = measured(a.db)
    out: dict[str, Any] = {"inputs": {k: v for k, v in vars(a).items() if k != "out"}}
    out["measured"] = m
    for idle, min_turns in ((0, 0), (60, 0), (60, a.min_turns)):
        a.idle_continue, a.min_turns = idle, min_turns
        sim = simulate(a)
        name = f"idle_continue_{idle}_min_turns_{min_turns}"
        out[name] = {"simulation": sim, "plan": plan(a, m, sim)}
        print(f"{name}: {sim} -> {out[name]['plan']}")
    a.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
