"""Record AgentSession histories of the control paths guarded by workflow.patched.

    .venv/bin/python -m tests.temporal.record_control_histories [PREFIX [SCENARIO ...]]

Scenarios: a reset signal that names nothing, pause and close sent while a run drains for
continue-as-new, a cancellation request, a start under another session's id, turns past the
StatecoreTurn interval across a continue-as-new, and a session that goes idle (all of them
unless named). Run by the current code they record the patched behaviour (files
``control-<scenario>-run<N>.json``); run from a checkout of the code before the patches with
PREFIX ``legacy`` they record the old behaviour, which the current code must still replay
(tests/temporal/test_replay.py). Only the temporalio and statecore names both versions share
are used here (and in tests/temporal/gated_model.py, which an older checkout needs beside
this file).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from statecore.contract._session import SessionInput
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import start_dev_server
from statecore.temporal._plugin import StatecorePlugin
from tests.temporal.gated_model import GATE_TIMEOUT_S, ONE_TURN_PER_RUN, GatedModel
from tests.temporal.record_histories import write_runs

QUEUE = "record-control-histories"
MODEL = GatedModel()


async def _settled() -> None:
    await asyncio.sleep(1.0)  # a signal is fire-and-forget: give the session time to apply it


async def reset_empty(sc: AgentSessionClient) -> None:
    await sc.send("agent", "reset-empty", "hello", turn_id="r1")
    await sc.handle("agent", "reset-empty").signal("reset", {})
    await _settled()
    await sc.send("agent", "reset-empty", "again", turn_id="r2")
    await sc.close("agent", "reset-empty")


async def _while_draining(sc: AgentSessionClient, session: str, name: str, arg: Any) -> None:
    await sc.send("agent", session, "first", turn_id="d1", **ONE_TURN_PER_RUN)
    MODEL.entered.clear()
    MODEL.gate.clear()
    turn = asyncio.ensure_future(
        sc.send("agent", session, "gated", turn_id="d2", **ONE_TURN_PER_RUN)
    )
    await asyncio.wait_for(MODEL.entered.wait(), timeout=GATE_TIMEOUT_S)
    await sc.handle("agent", session).signal(name, arg)
    await asyncio.sleep(0.5)
    MODEL.gate.set()
    await turn


async def drain_pause(sc: AgentSessionClient) -> None:
    await _while_draining(sc, "drain-pause", "pause", {"reason": "audit"})
    await _settled()
    await sc.handle("agent", "drain-pause").signal("close", {})


async def drain_close(sc: AgentSessionClient) -> None:
    await _while_draining(sc, "drain-close", "close", {})
    await _settled()
    # Before the patch the close was lost: close the run that carried on.
    if await sc.status("agent", "drain-close") == "WORKFLOW_EXECUTION_STATUS_RUNNING":
        await sc.handle("agent", "drain-close").signal("close", {})


async def cancelled(sc: AgentSessionClient) -> None:
    await sc.send("agent", "cancelled", "hello", turn_id="c1")
    await sc.handle("agent", "cancelled").cancel()


async def misnamed(sc: AgentSessionClient) -> None:
    await sc.client.start_workflow(
        "AgentSession",
        {"agent_id": "agent", "session_id": "impostor"},
        id=sc.workflow_id("agent", "misnamed"),
        task_queue=QUEUE,
    )
    await asyncio.sleep(2.0)
    if await sc.status("agent", "misnamed") == "WORKFLOW_EXECUTION_STATUS_RUNNING":
        await sc.client.get_workflow_handle(sc.workflow_id("agent", "misnamed")).signal("close", {})


async def sparse_turns(sc: AgentSessionClient) -> None:
    # Twelve turns over two runs (a run holds eleven), then a pause, a resume and a close:
    # turn upserts, skipped ones and the exact turn at a new run and a status change.
    for n in range(1, 13):
        await sc.send("agent", "sparse-turns", f"m{n}", turn_id=f"p{n}", max_turns_per_run=11)
    await sc.pause("agent", "sparse-turns", "audit")
    await _settled()
    await sc.resume("agent", "sparse-turns")
    await _settled()
    await sc.close("agent", "sparse-turns")


async def idle_continue(sc: AgentSessionClient) -> None:
    # Two turns, a pause, an idle period (the run moves on, paused), a resume, a turn sent
    # again and a new one in the next run, a close. Code before the idle continue-as-new has
    # no such option: it records the same calls in one run.
    fields = SessionInput.model_fields
    idle = (
        {"idle_continue_seconds": 1, "idle_continue_min_events": 1}
        if "idle_continue_min_events" in fields
        else {}
    )
    for n, turn_id in enumerate(["i1", "i2"]):
        await sc.send("agent", "idle-continue", f"m{n}", turn_id=turn_id, **idle)
    await sc.pause("agent", "idle-continue", "audit")
    await asyncio.sleep(3.0)
    await sc.resume("agent", "idle-continue")
    await _settled()
    await sc.send("agent", "idle-continue", "m0", turn_id="i1", **idle)
    await sc.send("agent", "idle-continue", "m2", turn_id="i3", **idle)
    await sc.close("agent", "idle-continue")


SCENARIOS: dict[str, Callable[[AgentSessionClient], Awaitable[None]]] = {
    "reset-empty": reset_empty,
    "drain-pause": drain_pause,
    "drain-close": drain_close,
    "cancelled": cancelled,
    "misnamed": misnamed,
    "sparse-turns": sparse_turns,
    "idle-continue": idle_continue,
}


async def record(prefix: str, names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = await start_dev_server()
        try:
            plugin = StatecorePlugin(
                f"sqlite+aiosqlite:///{tmp}/record.db", models={"default": MODEL}
            )
            client = await Client.connect(server.address, plugins=[plugin])
            async with Worker(client, task_queue=QUEUE):
                sc = AgentSessionClient(client, task_queue=QUEUE)
                for name in names:
                    await SCENARIOS[name](sc)
                    handle = sc.handle("agent", name)
                    try:
                        await asyncio.wait_for(handle.result(), timeout=30)
                    except Exception as err:  # failed or cancelled: recorded all the same
                        print(f"{name}: {type(err).__name__}")
                    await write_runs(client, handle.id, f"{prefix}-{name}")
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(
        record(sys.argv[1] if len(sys.argv) > 1 else "control", sys.argv[2:] or list(SCENARIOS))
    )
