"""Drivers for the turn benchmark: how each scenario sends a turn, and how latencies are taken.

Every scenario is driven the way a program drives a statecore session: one update-with-start
call per turn (``USE_EXISTING``), a fresh update id per turn, waiting for the result. The
AgentSession scenarios go through ``AgentSessionClient.send`` itself; the floor scenarios copy
what it does around the call (the same start operation, the same retry while a run moves on),
so the difference between them is statecore's turn and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from bench.harness.floor import DRAINING, FLOOR_WORKFLOW, FloorInput, FloorReply, FloorTurn
from bench.harness.process_cpu import CpuMeter, CpuReading
from statecore.temporal._client import AgentSessionClient

#: What a turn says. Short, like a chat message; the offline model echoes it with a report.
CONTENT = "turn {n}: please look at what we have so far and suggest the next step."

SendTurn = Callable[[str, int, str], Awaitable[Any]]
_RETRY_STATUSES = {
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.NOT_FOUND,
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.ABORTED,
}


@dataclass
class Scenario:
    """A named way to send one turn to a session: ``send(session_id, turn_number, turn_id)``."""

    name: str
    description: str
    send: SendTurn
    workflow_id: Callable[[str], str]
    #: Where its workflows must run (the worker with the scenario's store).
    task_queue: str

    async def check_placement(self, client: Client, session_id: str) -> None:
        """Fail loudly if the session's workflow runs on another scenario's task queue (the
        numbers would then belong to the wrong store)."""
        desc = await client.get_workflow_handle(self.workflow_id(session_id)).describe()
        if desc.task_queue != self.task_queue:
            raise RuntimeError(
                f"{self.name}: session {session_id} runs on task queue {desc.task_queue}, "
                f"not {self.task_queue}"
            )


def agent_scenario(
    name: str, description: str, sessions: AgentSessionClient, agent_id: str, **options: Any
) -> Scenario:
    async def send(session_id: str, n: int, turn_id: str) -> Any:
        return await sessions.send(
            agent_id, session_id, CONTENT.format(n=n), turn_id=turn_id, **options
        )

    return Scenario(
        name,
        description,
        send,
        lambda sid: sessions.handle(agent_id, sid).id,
        sessions.task_queue,
    )


def floor_scenario(
    name: str,
    description: str,
    client: Client,
    task_queue: str,
    update: str,
    *,
    max_turns_per_run: int = 1000,
    retry_for: timedelta = timedelta(minutes=2),
    workflow_type: str = FLOOR_WORKFLOW,
) -> Scenario:
    """Turns as ``update`` on a workflow shaped like ``FloorSession`` (its input, its reply,
    its way of moving to a new run): the floor itself or ``bench/harness/state_turns.py``'s."""

    def workflow_id(session_id: str) -> str:
        return f"bench-floor:{workflow_type}:{update}:{session_id}"

    async def send(session_id: str, n: int, turn_id: str) -> FloorReply:
        turn = FloorTurn(turn_id=turn_id, content=CONTENT.format(n=n))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + retry_for.total_seconds()
        delay = 0.05  # AgentSessionClient.send's backoff
        while True:
            try:
                return await client.execute_update_with_start_workflow(
                    update,
                    turn,
                    start_workflow_operation=WithStartWorkflowOperation(
                        workflow_type,
                        FloorInput(session_id=session_id, max_turns_per_run=max_turns_per_run),
                        id=workflow_id(session_id),
                        task_queue=task_queue,
                        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    ),
                    id=turn.turn_id,
                    result_type=FloorReply,
                )
            except (
                RPCError,
                WorkflowUpdateFailedError,
                WorkflowUpdateRPCTimeoutOrCancelledError,
            ) as err:
                if not _transient(err) or loop.time() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    return Scenario(name, description, send, workflow_id, task_queue)


def _transient(err: Exception) -> bool:
    if isinstance(err, WorkflowUpdateRPCTimeoutOrCancelledError):
        return True
    if isinstance(err, RPCError):
        return err.status in _RETRY_STATUSES
    cause = getattr(err, "cause", None)
    return isinstance(cause, ApplicationError) and cause.type == DRAINING


# --- timing ------------------------------------------------------------------------------------


@dataclass
class Samples:
    """Latencies of one scenario (seconds), the wall time they took together, and the CPU
    time the turn's processes spent meanwhile."""

    latencies: list[float] = field(default_factory=list)
    #: Measured blocks' wall time, less the pauses between turns (``sequential``'s ``pause``).
    wall_seconds: float = 0.0
    cpu: CpuReading = field(default_factory=CpuReading)
    paused_seconds: float = 0.0

    def summary(self) -> dict[str, float | int]:
        out = summarize(self.latencies, self.wall_seconds)
        n = len(self.latencies)
        out["bench_process_cpu_ms_per_turn"] = round(self.cpu.worker * 1000 / n, 2)
        out["server_cpu_ms_per_turn"] = round(self.cpu.server * 1000 / n, 2)
        return out

    @contextlib.contextmanager
    def measuring(self, meter: CpuMeter | None) -> Iterator[None]:
        """Adds the wall and CPU time spent in the block."""
        before = meter.read() if meter else None
        paused = self.paused_seconds
        start = time.perf_counter()
        yield
        self.wall_seconds += time.perf_counter() - start - (self.paused_seconds - paused)
        if meter and before:
            self.cpu = self.cpu + (meter.read_end() - before)


def summarize(latencies: Sequence[float], wall_seconds: float) -> dict[str, float | int]:
    ms = [x * 1000 for x in latencies]
    return {
        "turns": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p90_ms": round(percentile(ms, 90), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "min_ms": round(min(ms), 2),
        "max_ms": round(max(ms), 2),
        "wall_seconds": round(wall_seconds, 3),
        "turns_per_second": round(len(ms) / wall_seconds, 2) if wall_seconds else 0.0,
    }


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


async def timed(send: SendTurn, session_id: str, n: int, turn_id: str | None = None) -> float:
    """Seconds one turn took, as its caller saw it."""
    turn_id = turn_id or uuid.uuid4().hex
    start = time.perf_counter()
    await send(session_id, n, turn_id)
    return time.perf_counter() - start


async def sequential(
    scenario: Scenario,
    session_id: str,
    first: int,
    count: int,
    into: Samples,
    meter: CpuMeter | None = None,
    pause: Callable[[], float] | None = None,
) -> None:
    """``count`` turns one after another on one session; adds them to ``into``.

    ``pause``: seconds to wait before each turn (not part of its latency, nor of the block's
    wall time). Turns sent back to back can fall into step with the dev server's transfer
    queue, which is read at most 20 times a second: on some machines a whole round of
    regular-activity turns then comes out at ~22 ms and the next at ~50 ms (bench/README.md
    at 74815d7, "Method", the random pause). A random pause gives every turn its own offset
    from that clock, as turns arriving from people have."""
    with into.measuring(meter):
        for i in range(count):
            if pause is not None:
                asleep = time.perf_counter()
                await asyncio.sleep(pause())
                into.paused_seconds += time.perf_counter() - asleep
            into.latencies.append(await timed(scenario.send, session_id, first + i))


async def concurrent(
    scenario: Scenario,
    session_ids: Sequence[str],
    first: int,
    count: int,
    into: Samples,
    meter: CpuMeter | None = None,
) -> None:
    """Every session runs ``count`` sequential turns, all sessions at once."""

    async def one(session_id: str) -> list[float]:
        return [await timed(scenario.send, session_id, first + i) for i in range(count)]

    with into.measuring(meter):
        results = await asyncio.gather(*(one(s) for s in session_ids))
    for latencies in results:
        into.latencies.extend(latencies)


def shuffled_rounds(items: Sequence[Scenario], rounds: int, seed: int) -> list[list[Scenario]]:
    """The scenarios' order in each round: shuffled by a seeded generator, so no scenario
    always runs first or last or right after the same neighbour, and a run can be repeated."""
    rng = random.Random(seed)
    orders: list[list[Scenario]] = []
    for _ in range(rounds):
        order = list(items)
        rng.shuffle(order)
        orders.append(order)
    return orders
