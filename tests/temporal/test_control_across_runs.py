"""A pause or close accepted by a run takes effect in it or in the next run, at every timing
around continue-as-new.

With ``max_turns_per_run=1`` every turn ends its run: the run drains (new turns are refused as
retryable) while the turn is in flight, then continues as new. The model is the one part
faked: it waits at a gate the test opens, so the signal lands while the run drains, as the
turn's reply is released, or just after the turn returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from statecore.core._errors import SessionPausedError
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.temporal.conftest import Env, running_env
from tests.temporal.gated_model import GATE_TIMEOUT_S, ONE_TURN_PER_RUN, GatedModel
from tests.temporal.test_operators import signal, wait_for


@dataclass
class Gated:
    env: Env
    model: GatedModel
    server: DevServer


@pytest.fixture
async def gated(dev_server: DevServer) -> AsyncIterator[Gated]:
    model = GatedModel()
    async with (
        fresh_database("sqlite", "can") as url,
        running_env(dev_server, url, models={"default": model}) as env,
    ):
        yield Gated(env, model, dev_server)


async def _signal_at(timing: str, gated: Gated, session: str, name: str, payload: str) -> int:
    """Run one gated turn and send the signal at ``timing``; returns the turn's number."""
    env, model = gated.env, gated.model

    async def send() -> None:
        await signal(gated.server, env.agent, session, name, payload)

    model.entered.clear()
    model.gate.clear()
    turn = asyncio.ensure_future(
        env.sessions.send(
            env.agent, session, "gated turn", turn_id=f"g-{timing}", **ONE_TURN_PER_RUN
        )
    )
    await asyncio.wait_for(model.entered.wait(), timeout=GATE_TIMEOUT_S)
    if timing == "while-draining":
        report = await env.sessions.describe(env.agent, session)
        assert report.checkpoint.status == "draining"  # the window the signal used to miss
        await send()
        model.gate.set()
    elif timing == "as-the-reply-is-released":
        model.gate.set()
        await send()
    else:  # just after the turn returned, as the run continues as new
        model.gate.set()
        await turn
        await send()
    return (await turn).turn


TIMINGS = ["while-draining", "as-the-reply-is-released", "after-the-turn"]


@pytest.mark.parametrize("timing", TIMINGS)
async def test_pause_around_continue_as_new_is_never_lost(gated: Gated, timing: str) -> None:
    env = gated.env
    session = f"pause-{timing}"
    await env.sessions.send(env.agent, session, "first", turn_id="f1", **ONE_TURN_PER_RUN)
    turn = await _signal_at(timing, gated, session, "pause", '{"reason": "audit"}')
    assert turn == 2

    async def paused() -> bool:
        report = await env.sessions.describe(env.agent, session)
        return report.checkpoint.status == "paused"

    await wait_for(paused)
    report = await env.sessions.describe(env.agent, session)
    assert report.checkpoint.pause_reason == "audit"
    assert report.checkpoint.runs >= 3  # the pause crossed (at least) one continue-as-new
    with pytest.raises(SessionPausedError):
        await env.sessions.send(env.agent, session, "refused", turn_id="f3", **ONE_TURN_PER_RUN)
    await env.sessions.resume(env.agent, session)
    resumed = await env.sessions.send(env.agent, session, "again", turn_id="f4")
    assert resumed.turn == 3


@pytest.mark.parametrize("timing", TIMINGS)
async def test_close_around_continue_as_new_is_never_lost(gated: Gated, timing: str) -> None:
    env = gated.env
    session = f"close-{timing}"
    await env.sessions.send(env.agent, session, "first", turn_id="f1", **ONE_TURN_PER_RUN)
    await _signal_at(timing, gated, session, "close", "{}")
    handle = env.sessions.handle(env.agent, session)
    # The latest run ends closed (the handle follows continue-as-new to it).
    report = await asyncio.wait_for(handle.result(), timeout=GATE_TIMEOUT_S)
    assert report["checkpoint"]["status"] == "closed"
    assert report["checkpoint"]["message_count"] == 4  # both turns, kept in SQL
    assert await env.sessions.status(env.agent, session) == "WORKFLOW_EXECUTION_STATUS_COMPLETED"


async def test_rejections_stay_visible_in_the_next_run(gated: Gated) -> None:
    env = gated.env
    await env.sessions.send(env.agent, "kept", "first", turn_id="k1", **ONE_TURN_PER_RUN)
    await signal(gated.server, env.agent, "kept", "Pause", "{}")

    async def recorded() -> bool:
        return bool((await env.sessions.describe(env.agent, "kept")).rejections)

    await wait_for(recorded)
    await env.sessions.send(env.agent, "kept", "second", turn_id="k2", **ONE_TURN_PER_RUN)
    report = await env.sessions.describe(env.agent, "kept")
    assert report.checkpoint.runs >= 3  # the typo was recorded two runs ago ...
    assert [(r.operation, r.code) for r in report.rejections] == [("Pause", "UnknownOperation")]


async def test_a_hint_sent_while_draining_is_stored_before_the_run_moves_on(
    gated: Gated,
) -> None:
    env = gated.env
    await env.sessions.send(env.agent, "hint", "first", turn_id="h1", **ONE_TURN_PER_RUN)
    await _signal_at("while-draining", gated, "hint", "add_hint", '{"text": "be brief"}')
    fresh = await env.sessions.describe(env.agent, "hint", include_data=True)
    assert fresh.store("conversation").metadata["hints"] == 1
    assert fresh.checkpoint.runs >= 3
