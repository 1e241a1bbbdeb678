"""The classic chaos run: one worker at a time, SIGKILLed and restarted, while Temporal
restarts and PostgreSQL stops (``python -m bench.chaos``; bench/harness/chaos_two_workers.py reuses
its plan, figures and checks)."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.harness.chaos_processes import (
    DevServerProcess,
    PrivatePostgres,
    WorkerProcess,
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
