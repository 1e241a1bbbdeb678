"""Chaos: drive sessions while killing workers, restarting Temporal and stopping PostgreSQL.

    .venv/bin/python -m bench.chaos                # the long run (committed results)
    .venv/bin/python -m bench.chaos --quick        # about a minute (run by the test suite)
    .venv/bin/python -m bench.chaos --topology two-workers [--quick]


N sessions send M turns each, every turn with a client-generated turn id that is reused on
every retry. Meanwhile, at random moments: the worker is SIGKILLed and a new one started, the
Temporal dev server (persistent SQLite file) is stopped and started, and the private PostgreSQL
holding statecore's state is stopped for 10-30 s. Afterwards everything is checked from SQL
and from the replies the clients received: every turn answered exactly once, every message
stored exactly once and in order, no session stuck, paused or failed, and each session's
describe report agreeing with its rows.

``--topology two-workers`` (bench/harness/chaos_two_workers.py) runs two workers on one task queue
instead and SIGKILLs a random one every 3-9 s, while turn ids are re-sent on purpose, sessions
continue-as-new every 3 turns and an operator pauses and resumes sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from dataclasses import asdict
from pathlib import Path

from bench.harness.chaos_classic import Chaos, Plan
from bench.harness.chaos_processes import (
    private_postgres_unavailable,
)


def parse_plan(argv: list[str] | None = None) -> tuple[Plan, Path, str]:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="about a minute: the test-suite version")
    p.add_argument("--sessions", type=int)
    p.add_argument("--turns", type=int)
    p.add_argument("--worker-kills", type=int)
    p.add_argument("--server-restarts", type=int)
    p.add_argument("--db-outages", type=int)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--topology",
        choices=["classic", "two-workers"],
        default="classic",
        help="classic: one worker, server restarts and database outages; two-workers: two "
        "workers on one queue, one SIGKILLed every 3-9 s, duplicate turn ids, continue-as-new "
        "and pause/resume",
    )
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    topology = a.topology
    if a.quick:
        base = Plan(4, 10, 3, 1, 1, (5.0, 8.0), a.seed)
    else:
        base = Plan(20, 55, 22, 3, 2, (10.0, 30.0), a.seed)
    plan = Plan(
        sessions=a.sessions or base.sessions,
        turns=a.turns or base.turns,
        worker_kills=a.worker_kills if a.worker_kills is not None else base.worker_kills,
        server_restarts=a.server_restarts
        if a.server_restarts is not None
        else base.server_restarts,
        db_outages=a.db_outages if a.db_outages is not None else base.db_outages,
        outage_seconds=base.outage_seconds,
        seed=a.seed,
    )
    if topology == "two-workers" and not (a.sessions or a.turns):
        plan.sessions, plan.turns = (2, 6) if a.quick else (8, 40)
    default_out = "chaos.json" if topology == "classic" else "chaos-two-workers.json"
    return plan, a.out or Path("bench/results") / default_out, topology


def main(argv: list[str] | None = None) -> int:
    plan, out, topology = parse_plan(argv)
    reason = private_postgres_unavailable()
    if reason:
        print(f"chaos: cannot run: {reason}")
        return 2
    with tempfile.TemporaryDirectory(prefix="statecore-chaos-") as tmp:
        chaos: Chaos | None = None
        if topology == "two-workers":
            from bench.harness.chaos_two_workers import TwoWorkerChaos, TwoWorkerPlan

            two = TwoWorkerPlan(plan.sessions, plan.turns, plan.seed)
            figures = asyncio.run(TwoWorkerChaos(two, Path(tmp)).run())
        else:
            chaos = Chaos(plan, Path(tmp))
            figures = asyncio.run(chaos.run())
    command = "python -m bench.chaos" + (f" --topology {topology}" if topology != "classic" else "")
    recorded_plan = asdict(plan)
    if topology == "two-workers":
        from bench.harness.chaos_two_workers import KILL_EVERY, RESEND_CHANCE, TURNS_PER_RUN

        recorded_plan = {
            "sessions": plan.sessions,
            "turns": plan.turns,
            "seed": plan.seed,
            "workers": 2,
            "kill_every_seconds": list(KILL_EVERY),
            "max_turns_per_run": TURNS_PER_RUN,
            "resend_chance": RESEND_CHANCE,
        }
    result = {
        "plan": recorded_plan,
        "topology": topology,
        "figures": asdict(figures),
        "ok": figures.ok,
        "command": command + (" --quick" if plan.sessions in (2, 4) else ""),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    if chaos is not None:
        # The timeline the figure is drawn from: every event and every completed turn, in time.
        result["timeline"] = {
            "events": [
                {"at_seconds": at, "kind": kind, "lasted_seconds": lasted}
                for at, kind, lasted in chaos.events
            ],
            "turn_completed_seconds": sorted(chaos.completions),
        }
    out.write_text(json.dumps(result, indent=2) + "\n")
    if chaos is not None:
        from bench.harness.plot import plot_chaos_timeline

        plot_chaos_timeline(result, out.with_name(out.stem + "-timeline.png"))
    f = figures
    if topology == "two-workers":
        print(
            f"chaos (two workers): {f.worker_kills} worker kills, {f.duplicate_resends} duplicate "
            f"re-sends, {f.pauses} pauses, {f.continue_as_new} continue-as-new;"
        )
    print(
        f"chaos: {f.worker_kills} worker kills, {f.server_restarts} server restarts, "
        f"{f.db_outages} database outages survived; {f.turns_completed}/{f.turns_planned} turns "
        f"completed; lost {f.lost}, duplicated {f.duplicated}, out of order {f.out_of_order}, "
        f"stuck {f.stuck_sessions}, describe mismatches {f.describe_mismatches} "
        f"({f.client_retries} client retries, {f.seconds}s)"
    )
    for problem in f.problems[:20]:
        print("  problem:", problem)
    return 0 if f.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
