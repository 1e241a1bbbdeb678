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

``--topology two-workers`` (bench/chaos_two_workers.py) runs two workers on one task queue
instead and SIGKILLs a random one every 3-9 s, while turn ids are re-sent on purpose, sessions
continue-as-new every 3 turns and an operator pauses and resumes sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.chaos_processes import (
    DevServerProcess,
    PrivatePostgres,
    WorkerProcess,
    private_postgres_unavailable,
)
from statecore.core._models import SessionRef
from statecore.store import open_store
from statecore.store._migrate import upgrade_database
from statecore.temporal._client import AgentSessionClient

TASK_QUEUE = "chaos"
AGENT = "chaos-agent"
#: Session options: a dead worker's model call is retried elsewhere within seconds.
SESSION_OPTIONS = {"model_heartbeat_seconds": 2.0, "model_timeout_seconds": 20.0}


@dataclass
class Plan:
    sessions: int
    turns: int
    worker_kills: int
    server_restarts: int
    db_outages: int
    outage_seconds: tuple[float, float]
    seed: int


@dataclass
class Figures:
    sessions: int = 0
    turns_planned: int = 0
    turns_completed: int = 0
    worker_kills: int = 0
    server_restarts: int = 0
    db_outages: int = 0
    db_outage_seconds: list[float] = field(default_factory=list)
    client_retries: int = 0
    #: Two-worker topology: turn ids re-sent on purpose, operator pauses, runs rolled over.
    duplicate_resends: int = 0
    pauses: int = 0
    continue_as_new: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    stuck_sessions: int = 0
    describe_mismatches: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.out_of_order
            or self.stuck_sessions
            or self.describe_mismatches
            or self.problems
        )


class Chaos:
    def __init__(self, plan: Plan, folder: Path) -> None:
        self.plan = plan
        self.folder = folder
        self.rng = random.Random(plan.seed)
        self.figures = Figures(sessions=plan.sessions, turns_planned=plan.sessions * plan.turns)
        self.postgres = PrivatePostgres(folder / "pg")
        self.server = DevServerProcess(folder)
        self.worker: WorkerProcess | None = None
        self.replies: dict[str, dict[str, int]] = {}  # session -> turn id -> turn number
        self.done = asyncio.Event()
        #: Set once every planned event has happened (see ``_drive``).
        self.broken = asyncio.Event()
        self.supervise = True
        self.started = time.monotonic()
        #: What happened when, for the timeline figure: (seconds, kind, seconds it lasted)
        #: per event, and the second each turn completed at.
        self.events: list[tuple[float, str, float]] = []
        self.completions: list[float] = []

    # --- the run -----------------------------------------------------------------------------

    async def run(self) -> Figures:
        started = self.started = time.monotonic()
        self.postgres.init().start()
        await upgrade_database(self.postgres.url)
        await self.server.start()
        self.worker = WorkerProcess(
            self.server.address, TASK_QUEUE, self.postgres.url, self.folder / "worker.log"
        )
        self.worker.start()
        supervisor = asyncio.ensure_future(self._keep_worker_running())
        try:
            drivers = [
                asyncio.ensure_future(self._drive(f"s{i}")) for i in range(self.plan.sessions)
            ]
            breaker = asyncio.ensure_future(self._break_things())
            breaker.add_done_callback(lambda _: self.broken.set())
            await asyncio.gather(*drivers)
            self.done.set()
            await breaker
            await self._verify()
        finally:
            self.supervise = False
            supervisor.cancel()
            if self.worker:
                self.worker.kill()
            self.server.stop()
            self.postgres.stop()
        self.figures.seconds = round(time.monotonic() - started, 1)
        return self.figures

    async def _client(self) -> AgentSessionClient:
        while True:
            try:
                client = await Client.connect(
                    self.server.address, data_converter=pydantic_data_converter
                )
                return AgentSessionClient(client, task_queue=TASK_QUEUE)
            except RuntimeError:
                await asyncio.sleep(0.5)

    async def _drive(self, session: str) -> None:
        """Send this session's turns in order; a failed send is retried with the same id."""
        sessions = await self._client()
        answered = self.replies.setdefault(session, {})
        for i in range(self.plan.turns):
            turn_id = f"{session}-{i}"
            if i == self.plan.turns - 1:
                # The last turns wait for the last planned event: sessions that finished
                # early would otherwise skip it (the run ends when the drivers do), and the
                # last turns still have to get through what it broke.
                await self.broken.wait()
            while True:
                try:
                    result = await sessions.send(
                        AGENT,
                        session,
                        f"{session} message {i}",
                        turn_id=turn_id,
                        **SESSION_OPTIONS,
                    )
                    break
                except Exception as exc:  # the server, worker or database is down: retry
                    self.figures.client_retries += 1
                    if "Timeout" not in str(exc) and "Connection" not in type(exc).__name__:
                        await asyncio.sleep(0.5)
                    if self.figures.client_retries % 50 == 0:
                        sessions = await self._client()
            if turn_id in answered and answered[turn_id] != result.turn:
                self.figures.problems.append(
                    f"{turn_id} answered as turns {answered[turn_id]} and {result.turn}"
                )
            if turn_id not in answered:
                self.completions.append(round(time.monotonic() - self.started, 2))
            answered[turn_id] = result.turn
            self.figures.turns_completed = sum(len(v) for v in self.replies.values())

    async def _keep_worker_running(self) -> None:
        """A process supervisor's job: a worker that died (or could not start) is restarted."""
        while self.supervise:
            await asyncio.sleep(1.0)
            if self.worker is not None and not self.worker.alive():
                self.worker.start()

    async def _break_things(self) -> None:
        plan = self.plan
        events = (
            ["kill"] * plan.worker_kills
            + ["server"] * plan.server_restarts
            + ["db"] * plan.db_outages
        )
        self.rng.shuffle(events)
        total = plan.sessions * plan.turns
        for n, event in enumerate(events, start=1):
            # Spread the events over the run by progress, with jitter; never past the turns
            # that can complete before the last event (each session holds its last one back).
            target = min(total * n / (len(events) + 1), total - plan.sessions)
            # Polls progress: the drivers report turns, not events.
            while self.figures.turns_completed < target and not self.done.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            if self.done.is_set():
                break
            await asyncio.sleep(self.rng.uniform(0.0, 1.0))
            await self._event(event)

    async def _event(self, event: str) -> None:
        began = time.monotonic()
        try:
            await self._break(event)
        finally:
            kind = {"kill": "worker SIGKILL", "server": "Temporal restart"}.get(
                event, "PostgreSQL outage"
            )
            now = time.monotonic()
            self.events.append((round(began - self.started, 2), kind, round(now - began, 2)))

    async def _break(self, event: str) -> None:
        assert self.worker is not None
        if event == "kill":
            self.worker.kill()
            self.figures.worker_kills += 1
            await asyncio.sleep(self.rng.uniform(0.2, 1.5))
            self.worker.start()
        elif event == "server":
            await asyncio.to_thread(self.server.stop)
            self.figures.server_restarts += 1
            await asyncio.sleep(self.rng.uniform(1.0, 3.0))
            await self.server.start()
        else:
            seconds = self.rng.uniform(*self.plan.outage_seconds)
            await asyncio.to_thread(self.postgres.stop, crash=True)
            self.figures.db_outages += 1
            self.figures.db_outage_seconds.append(round(seconds, 1))
            await asyncio.sleep(seconds)
            await asyncio.to_thread(self.postgres.start)

    # --- verification ------------------------------------------------------------------------

    async def _verify(self) -> None:
        f = self.figures
        store = await open_store(self.postgres.url)
        sessions = await self._client()
        try:
            for i in range(self.plan.sessions):
                session = f"s{i}"
                expected = [f"{session}-{t}" for t in range(self.plan.turns)]
                answered = self.replies.get(session, {})
                f.lost += sum(1 for t in expected if t not in answered)
                async with store.transaction() as tx:
                    rows = await tx.conversation.messages(
                        SessionRef(agent_id=AGENT, session_id=session)
                    )
                per_turn: dict[str, list[str]] = {}
                for m in rows:
                    per_turn.setdefault(m.turn_id, []).append(m.role)
                f.duplicated += sum(max(0, len(roles) - 2) for roles in per_turn.values())
                f.lost += sum(
                    1
                    for t in expected
                    if per_turn.get(t) != ["user", "assistant"] and len(per_turn.get(t, [])) < 2
                )
                if [m.seq for m in rows] != list(range(1, len(rows) + 1)):
                    f.out_of_order += 1
                order = [m.turn_id for m in rows if m.role == "user"]
                if order != [t for t in expected if t in order]:
                    f.out_of_order += 1
                numbers = [answered[t] for t in expected if t in answered]
                if numbers != sorted(numbers) or len(set(numbers)) != len(numbers):
                    f.out_of_order += 1
                report = await sessions.describe(AGENT, session)
                if report.checkpoint.status != "active":
                    f.stuck_sessions += 1
                    f.problems.append(f"{session} is {report.checkpoint.status}")
                if await sessions.status(AGENT, session) != "WORKFLOW_EXECUTION_STATUS_RUNNING":
                    f.stuck_sessions += 1
                if (
                    report.checkpoint.message_count != len(rows)
                    or report.store("conversation").items != len(rows)
                    or report.checkpoint.turn != self.plan.turns
                ):
                    f.describe_mismatches += 1
                    f.problems.append(
                        f"{session}: describe says {report.checkpoint.message_count} messages,"
                        f" turn {report.checkpoint.turn}; SQL has {len(rows)} rows"
                    )
        finally:
            await store.close()


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
            from bench.chaos_two_workers import TwoWorkerChaos, TwoWorkerPlan

            two = TwoWorkerPlan(plan.sessions, plan.turns, plan.seed)
            figures = asyncio.run(TwoWorkerChaos(two, Path(tmp)).run())
        else:
            chaos = Chaos(plan, Path(tmp))
            figures = asyncio.run(chaos.run())
    command = "python -m bench.chaos" + (f" --topology {topology}" if topology != "classic" else "")
    recorded_plan = asdict(plan)
    if topology == "two-workers":
        from bench.chaos_two_workers import KILL_EVERY, RESEND_CHANCE, TURNS_PER_RUN

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
        from bench.plot import plot_chaos_timeline

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
