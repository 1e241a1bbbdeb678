"""Share tokens through the turn API on a real Temporal server: one agent shares its plan,
another updates it in its own turn, and two agents writing through one token from two worker
processes give one commit and one typed conflict."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from statecore.core._models import SessionRef
from statecore.store.sql import SqlStateStore
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.temporal.conftest import Env, running_env
from tests.temporal.share_workflow import PlanAgent, PlanTurn, PlanTurnResult

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def plan_env(dev_server: DevServer, dialect: str) -> AsyncIterator[Env]:
    async with (
        fresh_database(dialect, "share") as url,
        running_env(dev_server, url, extra_workflows=[PlanAgent]) as env,
    ):
        yield env


async def _agent(env: Env, agent: str, session: str, queue: str | None = None) -> WorkflowHandle:
    ref = SessionRef(agent_id=f"{env.agent}-{agent}", session_id=session)
    return await env.client.start_workflow(
        PlanAgent.run,
        ref,
        id=f"plan:{ref.agent_id}:{session}",
        task_queue=queue or env.task_queue,
    )


async def _turn(handle: WorkflowHandle, **request: object) -> PlanTurnResult:
    turn = PlanTurn(turn_id=uuid.uuid4().hex[:12], **request)  # type: ignore[arg-type]
    result: PlanTurnResult = await handle.execute_update(PlanAgent.turn, turn)
    return result


async def _refused(handle: WorkflowHandle, code: str, **request: object) -> None:
    with pytest.raises(WorkflowUpdateFailedError) as caught:
        await _turn(handle, **request)
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == code, cause


async def test_one_agent_shares_its_plan_and_another_updates_it(dev_server: DevServer) -> None:
    async with plan_env(dev_server, "sqlite") as env:
        planner = await _agent(env, "planner", "plan-1")
        writer = await _agent(env, "writer", "task-7")
        reader = await _agent(env, "reader", "task-8")
        shared = await _turn(planner, action="share", step="outline")
        read_only = await _turn(planner, action="share", step="outline", access="read")

        added = await _turn(writer, action="add", token=shared.token, step="write")
        assert added.steps == ["outline", "write"] and added.version == 2
        seen = await _turn(reader, action="read", token=read_only.token)
        assert seen.steps == ["outline", "write"]
        await _refused(reader, "ShareAccessDenied", action="add", token=read_only.token, step="x")
        await _refused(reader, "ShareTokenUnknown", action="read", token="scs_guessed")

        await _turn(planner, action="revoke", token=shared.token)
        await _refused(writer, "ShareRevoked", action="add", token=shared.token, step="y")

        store = await SqlStateStore.connect(env.database_url)
        try:
            async with store.transaction(read_only=True) as tx:
                owner = SessionRef(agent_id=f"{env.agent}-planner", session_id="plan-1")
                doc = await tx.state.get(owner.namespace, owner.session_id, owner.agent_id)
        finally:
            await store.close()
        # The second share rewrote the plan (version 2); the writer's turn made version 3.
        assert doc is not None and doc.state == {"steps": ["outline", "write"]}


async def test_a_kv_bucket_shared_through_the_turn_api(dev_server: DevServer) -> None:
    async with plan_env(dev_server, "sqlite") as env:
        owner = await _agent(env, "owner", "notes-1")
        counter = await _agent(env, "counter", "task-1")
        token = (await _turn(owner, action="share-kv")).token
        assert (await _turn(counter, action="count", token=token)).version == 2
        assert (await _turn(counter, action="count", token=token)).version == 3
        # A state token is not a KV token.
        plan = (await _turn(owner, action="share", step="outline")).token
        await _refused(counter, "ShareAccessDenied", action="count", token=plan)
        store = await SqlStateStore.connect(env.database_url)
        try:
            async with store.transaction(read_only=True) as tx:
                ref = SessionRef(agent_id=f"{env.agent}-owner", session_id="notes-1")
                entry = await tx.kv.get(ref.kv_scope, "notes", "count")
        finally:
            await store.close()
        assert entry is not None and (entry.value, entry.revision) == (3, 3)


def _worker(address: str, queue: str, url: str, ready: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.temporal.share_worker", address, queue, url, str(ready)],
        cwd=ROOT,
        start_new_session=True,
    )


async def _until(what: str, check: object, within: float = 60.0) -> None:
    for _ in range(int(within * 10)):
        if await check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"waited {within}s for {what}")


@pytest.mark.parametrize(
    "dialect",
    [
        pytest.param("sqlite"),
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mariadb),
    ],
)
async def test_two_worker_processes_writing_through_one_token(
    dev_server: DevServer, dialect: str, tmp_path: Path
) -> None:
    async with plan_env(dev_server, dialect) as env:
        planner = await _agent(env, "planner", "plan-1")
        token = (await _turn(planner, action="share", step="outline")).token
        queues = [f"{env.task_queue}-{n}" for n in (1, 2)]
        workers = [
            _worker(env.address, q, env.database_url, tmp_path / f"ready-{q}") for q in queues
        ]
        try:
            for q in queues:
                ready = tmp_path / f"ready-{q}"
                await _until(f"worker on {q}", lambda r=ready: _exists(r))
            agents = [await _agent(env, f"w{n}", "task", q) for n, q in enumerate(queues)]
            turns = [
                asyncio.create_task(_turn(a, action="add", token=token, step=f"by-{n}", hold=True))
                for n, a in enumerate(agents)
            ]
            for a in agents:
                await _until("both turns read the plan", lambda a=a: _held(a))
            for a in agents:
                await a.signal(PlanAgent.release)
            results = await asyncio.gather(*turns, return_exceptions=True)
        finally:
            for w in workers:
                w.kill()
                w.wait(timeout=10)
        won = [r for r in results if isinstance(r, PlanTurnResult)]
        lost = [r for r in results if isinstance(r, WorkflowUpdateFailedError)]
        assert len(won) == 1 and len(lost) == 1, results
        assert isinstance(lost[0].cause, ApplicationError)
        assert lost[0].cause.type == "VersionConflict"
        store = await SqlStateStore.connect(env.database_url)
        try:
            async with store.transaction(read_only=True) as tx:
                owner = SessionRef(agent_id=f"{env.agent}-planner", session_id="plan-1")
                doc = await tx.state.get(owner.namespace, owner.session_id, owner.agent_id)
        finally:
            await store.close()
        assert doc is not None and doc.version == 2
        assert doc.state == {"steps": won[0].steps} and len(won[0].steps) == 2


async def _exists(path: Path) -> bool:
    return path.exists()


async def _held(handle: WorkflowHandle) -> bool:
    return bool(await handle.query(PlanAgent.held_turns) >= 1)
