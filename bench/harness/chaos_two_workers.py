"""The two-worker chaos topology: ``python -m bench.chaos --topology two-workers``.

Two workers poll one task queue; every 3-9 s a random one of them is SIGKILLed (a supervisor
starts it again). Meanwhile the drivers re-send answered turn ids on purpose (each must come
back as the same turn, stored once), sessions continue-as-new every few turns
(``max_turns_per_run``), and an operator pauses and resumes random sessions. The checks are
the classic run's (bench/chaos.py): every turn answered once and stored once, in order, no
session stuck, describe agreeing with SQL; plus every duplicate answered as its original.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness.chaos_classic import AGENT, SESSION_OPTIONS, TASK_QUEUE, Chaos, Figures, Plan
from bench.harness.chaos_processes import WorkerProcess
from statecore.core._errors import StatecoreError
from statecore.temporal._client import AgentSessionClient

#: Continue-as-new this often, so runs roll over while workers die and sessions pause.
TURNS_PER_RUN = 3
#: Seconds between kills (one random worker each time).
KILL_EVERY = (3.0, 9.0)
#: Chance that an answered turn is sent again with the same id.
RESEND_CHANCE = 0.35


@dataclass
class TwoWorkerPlan:
    sessions: int
    turns: int
    seed: int
    #: Seconds between one operator's pause and resume of a random session.
    pause_for: tuple[float, float] = (0.3, 1.5)


class TwoWorkerChaos(Chaos):
    def __init__(self, plan: TwoWorkerPlan, folder: Path) -> None:
        super().__init__(Plan(plan.sessions, plan.turns, 0, 0, 0, (0.0, 0.0), plan.seed), folder)
        self.two = plan
        self.workers: list[WorkerProcess] = []
        self.figures = Figures(sessions=plan.sessions, turns_planned=plan.sessions * plan.turns)

    async def run(self) -> Figures:
        started = time.monotonic()
        self.postgres.init().start()
        from statecore.store._migrate import upgrade_database

        await upgrade_database(self.postgres.url)
        await self.server.start()
        self.workers = [
            WorkerProcess(
                self.server.address, TASK_QUEUE, self.postgres.url, self.folder / f"w{n}.log"
            )
            for n in range(2)
        ]
        for worker in self.workers:
            worker.start()
        background = [
            asyncio.ensure_future(self._keep_workers_running()),
            asyncio.ensure_future(self._kill_workers()),
            asyncio.ensure_future(self._pause_and_resume()),
        ]
        try:
            # Nothing waits for a last planned event here: kills go on until the turns end.
            self.broken.set()
            await asyncio.gather(*(self._drive(f"s{i}") for i in range(self.plan.sessions)))
            self.done.set()
            for task in background:
                task.cancel()
            await self._resume_everything()
            await self._verify()
            await self._count_runs()
        finally:
            self.supervise = False
            for task in background:
                task.cancel()
            for worker in self.workers:
                worker.kill()
            self.server.stop()
            self.postgres.stop()
        self.figures.seconds = round(time.monotonic() - started, 1)
        return self.figures

    # --- what breaks ---------------------------------------------------------------------------

    async def _keep_workers_running(self) -> None:
        while self.supervise:
            await asyncio.sleep(1.0)
            for worker in self.workers:
                if not worker.alive():
                    worker.start()

    async def _kill_workers(self) -> None:
        # The first kill lands as soon as a turn has been answered, so even a run shorter
        # than one kill interval (the quick run on an idle machine) loses a worker mid-run.
        while self.figures.turns_completed == 0 and not self.done.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        wait = 0.0
        while not self.done.is_set():
            await asyncio.sleep(wait)
            wait = self.rng.uniform(*KILL_EVERY)
            victim = self.rng.choice(self.workers)
            if victim.alive():
                await asyncio.to_thread(victim.kill)
                self.figures.worker_kills += 1

    async def _pause_and_resume(self) -> None:
        sessions = await self._client()
        while not self.done.is_set():
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))
            session = f"s{self.rng.randrange(self.plan.sessions)}"
            try:
                await sessions.pause(AGENT, session, reason="chaos operator")
                self.figures.pauses += 1
                await asyncio.sleep(self.rng.uniform(*self.two.pause_for))
            except StatecoreError:
                continue  # not started yet, or between runs: the operator tries another
            finally:
                await self._resume(sessions, session)

    async def _resume(self, sessions: AgentSessionClient, session: str) -> None:
        for _ in range(20):
            try:
                await sessions.resume(AGENT, session)
                return
            except StatecoreError:
                await asyncio.sleep(0.5)

    async def _resume_everything(self) -> None:
        """An operator's last round: nothing stays paused (a resume lost to a run ending
        shows up as a session the drivers could not finish, counted as stuck)."""
        sessions = await self._client()
        for i in range(self.plan.sessions):
            await self._resume(sessions, f"s{i}")

    # --- the drivers ---------------------------------------------------------------------------

    async def _send(self, sessions: AgentSessionClient, session: str, i: int) -> int:
        turn_id = f"{session}-{i}"
        while True:
            try:
                result = await sessions.send(
                    AGENT,
                    session,
                    f"{session} message {i}",
                    turn_id=turn_id,
                    max_turns_per_run=TURNS_PER_RUN,
                    **SESSION_OPTIONS,
                )
                return result.turn
            except Exception:  # paused, a worker mid-restart, a run ending: the same id again
                self.figures.client_retries += 1
                await asyncio.sleep(0.3)

    async def _drive(self, session: str) -> None:
        sessions = await self._client()
        answered = self.replies.setdefault(session, {})
        for i in range(self.plan.turns):
            turn = await self._send(sessions, session, i)
            answered[f"{session}-{i}"] = turn
            self.figures.turns_completed = sum(len(v) for v in self.replies.values())
            if self.rng.random() < RESEND_CHANCE:
                # On purpose: a client that lost the reply sends the same turn id again,
                # maybe several turns later.
                again = self.rng.randrange(i + 1)
                self.figures.duplicate_resends += 1
                turn_again = await self._send(sessions, session, again)
                if turn_again != answered[f"{session}-{again}"]:
                    self.figures.problems.append(
                        f"{session}-{again} re-sent came back as turn {turn_again}, "
                        f"first as {answered[f'{session}-{again}']}"
                    )

    async def _count_runs(self) -> None:
        sessions = await self._client()
        for i in range(self.plan.sessions):
            report = await sessions.describe(AGENT, f"s{i}")
            self.figures.continue_as_new += report.checkpoint.runs - 1
