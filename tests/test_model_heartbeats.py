"""A model call heartbeats while it runs (statecore.activities._turns._heartbeating): from a
timer beside the call, every third of the heartbeat timeout, until the call ends."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from statecore.activities._turns import _heartbeating


def _environment(heartbeat_timeout: float) -> tuple[ActivityEnvironment, list[float]]:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=heartbeat_timeout))
    beats: list[float] = []
    env.on_heartbeat = lambda *_: beats.append(asyncio.get_running_loop().time())
    return env, beats


async def test_a_long_call_heartbeats_until_it_ends() -> None:
    env, beats = _environment(0.3)  # a heartbeat every 0.1 s

    async def call() -> str:
        await asyncio.sleep(0.65)
        return "answer"

    assert await env.run(_heartbeating, call()) == "answer"
    # Six are due; a busy machine fires a timer late, and each next one counts from there.
    assert 3 <= len(beats) <= 7, beats
    count = len(beats)
    await asyncio.sleep(0.25)
    assert len(beats) == count  # the timer ended with the call


async def test_a_quick_call_sends_no_heartbeat() -> None:
    env, beats = _environment(0.3)

    async def call() -> int:
        return 7

    assert await env.run(_heartbeating, call()) == 7
    await asyncio.sleep(0.15)
    assert beats == []


async def test_a_heartbeat_that_raises_does_not_end_the_heartbeats() -> None:
    env, beats = _environment(0.3)
    failed: list[float] = []

    def heartbeat(*_: object) -> None:
        if not failed:
            failed.append(asyncio.get_running_loop().time())
            raise RuntimeError("the heartbeat could not be sent")
        beats.append(asyncio.get_running_loop().time())

    env.on_heartbeat = heartbeat
    loop = asyncio.get_running_loop()
    errors: list[object] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context.get("exception")))
    try:

        async def call() -> str:
            await asyncio.sleep(0.65)
            return "answer"

        assert await env.run(_heartbeating, call()) == "answer"
    finally:
        loop.set_exception_handler(None)
    assert failed and len(beats) >= 2, beats
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)


async def test_a_cancelled_activity_cancels_its_call() -> None:
    env, _ = _environment(0.3)
    cancelled = asyncio.Event()

    async def call() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    running = asyncio.ensure_future(env.run(_heartbeating, call()))
    await asyncio.sleep(0.05)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert cancelled.is_set()
