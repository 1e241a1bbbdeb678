"""A model endpoint that is down: the turn says why while it waits, Temporal keeps each
attempt's failure with its message, and after the session's retry budget the turn fails
typed and the session takes its next turn as usual.

The endpoint is real and dead: a port on this machine nothing listens on, reached through
the OpenAI client (``OpenAICompatibleModel``), as ``--model-base-url http://127.0.0.1:9/v1``
would."""

from __future__ import annotations

import asyncio
import socket

import pytest

from statecore import OfflineModel, OpenAICompatibleModel
from statecore.contract._session import SessionInput
from statecore.core._errors import ModelUnavailableError
from statecore.core._limits import DEFAULT_MODEL_ATTEMPTS
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.temporal.conftest import running_env

pytestmark = pytest.mark.temporal


def dead_endpoint() -> str:
    """The URL of a port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_the_retry_budget_has_a_documented_default() -> None:
    assert SessionInput(agent_id="a", session_id="s").model_attempts == DEFAULT_MODEL_ATTEMPTS
    assert DEFAULT_MODEL_ATTEMPTS == 10


async def test_a_dead_endpoint_fails_the_turn_typed_after_its_attempts(
    dev_server: DevServer,
) -> None:
    down = OpenAICompatibleModel(dead_endpoint(), model="gpt-test", timeout_seconds=5)
    models = {"default": OfflineModel(), "down": down}
    async with (
        fresh_database("sqlite", "model-down") as url,
        running_env(dev_server, url, models=models) as env,
    ):
        sessions = env.sessions
        turn = asyncio.ensure_future(
            sessions.send(env.agent, "down", "hello?", model="down", model_attempts=3)
        )
        # While the turn waits: what its latest attempt ran into, the attempt, the next one.
        status = None
        for _ in range(100):
            status = await sessions.waiting_on(env.agent, "down")
            if status or turn.done():
                break
            await asyncio.sleep(0.1)
        assert status is not None, "no failure was visible while the turn waited"
        assert "ModelUnavailable" in status and "attempt 1 of 3" in status, status
        assert "next attempt in" in status, status
        assert "size limit" not in status  # Temporal kept the failure itself

        with pytest.raises(ModelUnavailableError) as failed:
            await asyncio.wait_for(turn, 60)
        assert "127.0.0.1" in failed.value.message or "reach" in failed.value.message

        # The session is healthy: nothing was stored, and it answers on a model that works.
        report = await sessions.describe(env.agent, "down")
        assert report.checkpoint.status == "active" and report.checkpoint.turn == 0

        # The next turn is taken as any turn: it runs (and, the endpoint still down, fails
        # the same typed way within its budget) instead of finding the session stuck.
        with pytest.raises(ModelUnavailableError):
            await asyncio.wait_for(sessions.send(env.agent, "down", "still there?"), 60)
        report = await sessions.describe(env.agent, "down")
        assert report.checkpoint.status == "active"
