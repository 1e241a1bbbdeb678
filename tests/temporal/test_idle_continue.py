"""A session that goes idle after doing work continues as new, once per idle period, so its
next turn (on a worker that has evicted it) replays an almost empty run.

Real dev server, real worker, SQLite; ``idle_continue_seconds=1`` keeps the waits short.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from statecore.core._errors import SessionPausedError
from tests.temporal.conftest import Env
from tests.temporal.test_operators import wait_for

#: Any run that has taken a turn is worth leaving here (the default waits for 200 events).
IDLE = {"idle_continue_seconds": 1, "idle_continue_min_events": 1}


async def _run_info(env: Env, session: str) -> tuple[str, int, int]:
    """(run id, runs per the checkpoint, events in the current run)."""
    handle = env.sessions.handle(env.agent, session)
    desc = await handle.describe()
    report = await env.sessions.describe(env.agent, session)
    return (
        desc.run_id or "",
        report.checkpoint.runs,
        desc.raw_description.workflow_execution_info.history_length,
    )


async def _wait_runs(env: Env, session: str, runs: int) -> None:
    async def moved() -> bool:
        return (await _run_info(env, session))[1] >= runs

    await wait_for(moved, within=20.0)


async def _start_input(env: Env, session: str) -> dict[str, Any]:
    """The current run's input, as its start event holds it."""
    history = await env.sessions.handle(env.agent, session).fetch_history()
    first = history.events[0]
    assert first.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    payload = first.workflow_execution_started_event_attributes.input.payloads[0]
    return json.loads(payload.data)


async def test_idle_session_continues_as_new_and_still_dedups(env: Env) -> None:
    session = "idle-dedup"
    first = await env.sessions.send(env.agent, session, "one", turn_id="t1", **IDLE)
    await env.sessions.send(env.agent, session, "two", turn_id="t2", **IDLE)
    await _wait_runs(env, session, 2)
    _, runs, events = await _run_info(env, session)
    assert runs == 2
    # The new run holds its start and first task, not the two turns before it.
    assert events <= 10, events
    carried = await _start_input(env, session)
    assert carried["checkpoint"]["turn"] == 2
    assert carried["checkpoint"]["recent_turn_ids"] == ["t1", "t2"]
    assert carried["idle_carried_seconds"] >= 1.0  # the TTL still counts from the last turn
    again = await env.sessions.send(env.agent, session, "one", turn_id="t1", **IDLE)
    assert again.duplicate and again.turn == first.turn == 1
    assert again.reply == first.reply
    third = await env.sessions.send(env.agent, session, "three", turn_id="t3", **IDLE)
    assert third.turn == 3 and not third.duplicate


async def test_paused_session_stays_paused_across_an_idle_continue(env: Env) -> None:
    session = "idle-paused"
    await env.sessions.send(env.agent, session, "one", turn_id="p1", **IDLE)
    await env.sessions.pause(env.agent, session, reason="maintenance")
    await _wait_runs(env, session, 2)
    report = await env.sessions.describe(env.agent, session)
    assert report.checkpoint.status == "paused"
    assert report.checkpoint.pause_reason == "maintenance"
    with pytest.raises(SessionPausedError):
        await env.sessions.send(env.agent, session, "refused", turn_id="p2", **IDLE)
    await env.sessions.resume(env.agent, session)
    assert (await env.sessions.send(env.agent, session, "two", turn_id="p3", **IDLE)).turn == 2


async def test_an_idle_session_continues_once_not_forever(env: Env) -> None:
    session = "idle-once"
    never = "idle-never"
    short = "idle-short"
    await env.sessions.send(env.agent, session, "one", turn_id="o1", **IDLE)
    await env.sessions.send(env.agent, never, "one", turn_id="n1", idle_continue_seconds=0)
    # A run shorter than idle_continue_min_events (200 by default) is not worth leaving.
    await env.sessions.send(env.agent, short, "one", turn_id="s1", idle_continue_seconds=1)
    await _wait_runs(env, session, 2)
    run_id, _, events = await _run_info(env, session)
    # Four idle periods more: the new run has done nothing, so it stays.
    await asyncio.sleep(4.5)
    assert await _run_info(env, session) == (run_id, 2, events)
    # With idle_continue_seconds=0 a session keeps its run, as before.
    assert (await _run_info(env, never))[1] == 1
    assert (await _run_info(env, short))[1] == 1
