"""What the change feed costs a turn, and how long a committed change takes to reach a reader.

    .venv/bin/python -m bench.events            # full run: bench/results/events.json
    .venv/bin/python -m bench.events --quick    # smoke run (tests/test_events_bench_smoke.py)

1. **CPU per turn, feed on vs off.** The worker's commit of a typical chat turn (two messages,
   a KV write, a state update, token usage: what ``statecore.commit_turn`` runs) is executed
   again and again on SQLite and PostgreSQL, in rounds that alternate the feed on and off. Off,
   the commit has no events to record. CPU is this process's (``time.process_time``),
   which is where the worker's share of a turn runs. The feed's cost is the difference,
   reported against the commit alone (an upper bound: a whole turn also runs the model call,
   the SDK and the workflow task) and against a whole AgentSession turn's worker CPU as
   ``bench/results/turns.json`` measured it.
2. **Commit to delivery.** A follower in another process (``follow_events``) receives what a
   writer commits one turn at a time; the delay is the follower's receipt time minus the end
   of the writer's commit (both wall clocks of this machine). PostgreSQL pushes (LISTEN/
   NOTIFY); SQLite polls at ``--poll-interval``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness.environment import machine_info
from statecore.contract._activities import CommitTurnInput, KVOp, StateOp
from statecore.core._models import Message, SessionRef, TokenUsage
from statecore.operations import _turn_commit as turn_commit
from statecore.store._feed import follow_events
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from statecore.store.sql import _events as sql_events
from statecore.store.sql import _turn_commit as sql_turn_commit
from statecore.store.sql._events import SqlEventStore
from tests.dbs import fresh_database, server_down_reason

ROOT = Path(__file__).resolve().parent.parent
TARGET_SHARE_OF_TURN = 0.05
RESULTS = ROOT / "bench" / "results"


#: Events one ``_turn`` records: messages (carrying the usage), kv, state.
EVENTS_PER_TURN = 3


def _turn(ref: SessionRef, n: int) -> CommitTurnInput:
    return CommitTurnInput(
        ref=ref,
        turn_id=f"t{n}",
        turn=n,
        messages=[
            Message(role="user", content=f"What is step {n} of the plan? " * 4),
            Message(role="assistant", content=f"Step {n}: write the section. " * 8),
        ],
        kv=[KVOp(op="put", bucket="notes", key="last", value={"turn": n})],
        state=StateOp(state={"step": n, "notes": ["x" * 40] * 5}),
        usage=TokenUsage(prompt_tokens=120, completion_tokens=60),
    )


async def _commit(store: SqlStateStore, commit: CommitTurnInput) -> None:
    async with store.transaction() as tx:
        await turn_commit.commit_turn(tx, commit)


def _no_events(*_: Any) -> list[Any]:
    return []


async def cpu_cost(url: str, rounds: int, turns: int) -> dict[str, Any]:
    """Alternating blocks of ``turns`` commits with the feed on and off, ``rounds`` times.

    Off, a commit has no events to record (``turn_events`` returns none). On, the feed's own
    code is timed where it runs: building the events, then on SQLite their append, on
    PostgreSQL their bind parameters (the events are CTEs of the commit's closing statement
    there, whose extra work in the driver and server shows only in the on/off difference)."""
    store = await SqlStateStore.connect(url)
    building, appending, parameters = (
        turn_commit.turn_events,
        SqlEventStore.append,
        sql_events.feed_parameters,
    )
    per_turn: dict[str, list[float]] = {"on": [], "off": []}
    in_feed = [0.0]

    def timed(work: Any) -> Any:
        # The feed's own code path, measured where it runs: this CPU is the feed's whatever
        # else the machine is doing, which the on/off difference is not.
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return work(*args, **kwargs)
            finally:
                in_feed[0] += time.process_time() - started

        return run

    async def timed_append(self: Any, namespace: str, events: Any) -> int:
        started = time.process_time()
        try:
            return await appending(self, namespace, events)
        finally:
            in_feed[0] += time.process_time() - started

    def feed(on: bool) -> None:
        turn_commit.turn_events = timed(building) if on else _no_events  # type: ignore[assignment]
        SqlEventStore.append = timed_append if on else appending  # type: ignore[method-assign]
        sql_events.feed_parameters = timed(parameters) if on else parameters
        sql_turn_commit.feed_parameters = sql_events.feed_parameters  # type: ignore[attr-defined]

    n = 0
    try:
        ref = SessionRef(namespace=f"b{uuid.uuid4().hex[:8]}", agent_id="a", session_id="s")
        for _ in range(20):  # warm-up: connections, statement caches
            n += 1
            await _commit(store, _turn(ref, n))
        for r in range(rounds):
            for arm in ("on", "off") if r % 2 == 0 else ("off", "on"):
                feed(arm == "on")
                started = time.process_time()
                for _ in range(turns):
                    n += 1
                    await _commit(store, _turn(ref, n))
                per_turn[arm].append((time.process_time() - started) * 1000 / turns)
    finally:
        turn_commit.turn_events = building  # type: ignore[assignment]
        SqlEventStore.append = appending  # type: ignore[method-assign]
        sql_events.feed_parameters = sql_turn_commit.feed_parameters = parameters  # type: ignore[attr-defined]
        await store.close()
    on, off = statistics.median(per_turn["on"]), statistics.median(per_turn["off"])
    return {
        "turns_per_arm": rounds * turns,
        "commit_cpu_ms_per_turn_feed_on": round(on, 3),
        "commit_cpu_ms_per_turn_feed_off": round(off, 3),
        "feed_cpu_ms_per_turn": round(on - off, 3),
        "feed_share_of_commit": round((on - off) / off, 4),
        "feed_cpu_ms_per_turn_in_recording": round(in_feed[0] * 1000 / (rounds * turns), 3),
        "rounds_on": [round(x, 3) for x in per_turn["on"]],
        "rounds_off": [round(x, 3) for x in per_turn["off"]],
    }


async def delivery(url: str, turns: int, poll_interval: float) -> dict[str, Any]:
    """Commit ``turns`` turns one by one while a follower process reads them."""
    namespace = f"d{uuid.uuid4().hex[:8]}"
    follower = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.events",
        "--follower",
        url,
        namespace,
        str(poll_interval),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert follower.stdout is not None
    ready = await asyncio.wait_for(follower.stdout.readline(), 60)
    assert ready.strip() == b"ready", ready
    store = await SqlStateStore.connect(url)
    committed: dict[int, float] = {}
    received: dict[int, float] = {}
    ref = SessionRef(namespace=namespace, agent_id="a", session_id="s")
    try:
        for n in range(1, turns + 1):
            await _commit(store, _turn(ref, n))
            committed[n] = time.time()
            # One turn's events (messages with its usage, kv, state): its last number.
            deadline = time.monotonic() + 30
            while EVENTS_PER_TURN * n not in received:
                line = await asyncio.wait_for(
                    follower.stdout.readline(), deadline - time.monotonic()
                )
                seq, at = json.loads(line)
                received[seq] = at
            await asyncio.sleep(0.02)
    finally:
        follower.kill()
        await follower.wait()
        await store.close()
    first_of_turn = [EVENTS_PER_TURN * (n - 1) + 1 for n in committed]
    delays = sorted(
        (received[seq] - committed[n]) * 1000
        for n, seq in zip(committed, first_of_turn, strict=True)
    )
    return {
        "turns": turns,
        "poll_interval_s": poll_interval,
        "p50_ms": round(statistics.median(delays), 2),
        "p90_ms": round(delays[int(0.9 * (len(delays) - 1))], 2),
        "max_ms": round(delays[-1], 2),
        "min_ms": round(delays[0], 2),
    }


async def follower_main(url: str, namespace: str, poll_interval: float) -> None:
    store = await SqlStateStore.connect(url)
    try:
        async with store.new_events_signal(namespace, poll_interval=poll_interval):
            pass  # the listener connects once before the writer starts
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        async for event in follow_events(store, namespace, poll_interval=poll_interval):
            sys.stdout.write(json.dumps([event.seq, time.time()]) + "\n")
            sys.stdout.flush()
    finally:
        await store.close()


def _worker_turn_cpu() -> dict[str, float]:
    """A whole AgentSession turn's CPU in the benchmark process (client + worker), from the
    committed turn benchmark, to put the feed's cost in proportion."""
    try:
        found = json.loads((RESULTS / "turns.json").read_text())["single_session"]["scenarios"]
    except (OSError, KeyError, ValueError):
        return {}
    return {
        "sqlite": found["agent_sqlite"]["bench_process_cpu_ms_per_turn"],
        "postgresql": found["agent_postgresql"]["bench_process_cpu_ms_per_turn"],
    }


async def main(quick: bool, out: Path, poll_interval: float) -> dict[str, Any]:
    rounds, turns, deliveries = (2, 20, 10) if quick else (10, 100, 200)
    started = time.monotonic()
    whole_turn = _worker_turn_cpu()
    result: dict[str, Any] = {
        "benchmark": "events",
        "mode": "quick" if quick else "full",
        "command": " ".join(sys.argv),
        "machine": machine_info(),
        "settings": {"rounds": rounds, "turns_per_block": turns, "deliveries": deliveries},
        "target_share_of_turn_worker_cpu": TARGET_SHARE_OF_TURN,
        "dialects": {},
    }
    for dialect in ("sqlite", "postgresql"):
        reason = await server_down_reason(dialect)
        if reason is not None:
            result["dialects"][dialect] = {"skipped": reason}
            continue
        async with fresh_database(dialect, "evbench") as url:
            await upgrade_database(url)
            block: dict[str, Any] = {"cpu": await cpu_cost(url, rounds, turns)}
            if dialect in whole_turn:
                cpu = block["cpu"]
                turn = whole_turn[dialect]
                cpu["turn_worker_cpu_ms_from_turns_json"] = turn
                # Two estimates: the on/off difference (every effect, but as noisy as the
                # machine) and the recording's own CPU (exact, only the feed's code path).
                cpu["feed_share_of_turn_worker_cpu"] = round(
                    max(cpu["feed_cpu_ms_per_turn"], 0.0) / turn, 4
                )
                cpu["feed_share_of_turn_worker_cpu_in_recording"] = round(
                    cpu["feed_cpu_ms_per_turn_in_recording"] / turn, 4
                )
                cpu["met"] = cpu["feed_share_of_turn_worker_cpu_in_recording"] <= (
                    TARGET_SHARE_OF_TURN
                )
                cpu["met_by_difference"] = cpu["feed_share_of_turn_worker_cpu"] <= (
                    TARGET_SHARE_OF_TURN
                )
            interval = poll_interval if dialect == "sqlite" else 30.0
            block["delivery"] = await delivery(url, deliveries, interval)
            block["delivery"]["pushed"] = dialect == "postgresql"
            result["dialects"][dialect] = block
    result["elapsed_seconds"] = round(time.monotonic() - started, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (seconds)")
    parser.add_argument("--out", type=Path, default=None, help="result JSON")
    parser.add_argument(
        "--poll-interval", type=float, default=0.05, help="SQLite follower's poll interval"
    )
    parser.add_argument("--follower", nargs=3, metavar=("URL", "NAMESPACE", "POLL"))
    args = parser.parse_args()
    if args.follower:
        url, namespace, poll = args.follower
        asyncio.run(follower_main(url, namespace, float(poll)))
        return
    out = args.out or RESULTS / ("events-quick.json" if args.quick else "events.json")
    result = asyncio.run(main(args.quick, out, args.poll_interval))
    for dialect, block in result["dialects"].items():
        print(dialect, json.dumps(block, indent=1))
    print(f"written to {out}")


if __name__ == "__main__":
    cli()
