"""``statecore chat`` while a turn cannot be answered: the status line says what the model call
ran into (attempt and error, read from Temporal), the session's current details in the Web UI
say which turn it is answering, and Ctrl-C ends the wait with the command that resends the
line under the same turn id.

The model endpoint is real and dead (a port nothing listens on, through the OpenAI client);
the program is the real ``statecore`` executable, interrupted with a real SIGINT."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from statecore import OpenAICompatibleModel
from statecore.cli._exits import EXIT_INTERRUPTED
from statecore.temporal._devserver import DevServer
from tests.cli.conftest import STATECORE, CliEnv, cli_environment, eventually
from tests.dbs import fresh_database
from tests.temporal.conftest import running_env
from tests.temporal.test_model_endpoint_down import dead_endpoint

pytestmark = pytest.mark.temporal

#: How long the status line may take to name the failed attempt: the first attempt fails at
#: once (connection refused), and the line is redrawn every couple of seconds.
SEES_FAILURE_WITHIN = 60.0


@pytest.fixture
async def down(dev_server: DevServer) -> AsyncIterator[CliEnv]:
    """A worker whose only model is an endpoint that is down."""
    model = OpenAICompatibleModel(dead_endpoint(), model="gpt-test", timeout_seconds=5)
    async with (
        fresh_database("sqlite", "chat-down") as url,
        running_env(dev_server, url, models={"default": model}) as env,
    ):
        yield CliEnv(env=env, server=dev_server)


async def _read_until(stream: asyncio.StreamReader, needle: str, within: float) -> str:
    """stderr up to the line holding ``needle``; fails, with what was read, if it never comes."""
    seen: list[str] = []

    async def read() -> str:
        while True:
            line = (await stream.readline()).decode()
            if not line:
                raise AssertionError(f"stderr ended before {needle!r}: {''.join(seen)}")
            seen.append(line)
            if needle in line:
                return "".join(seen)

    try:
        return await asyncio.wait_for(read(), within)
    except TimeoutError:
        raise AssertionError(f"no {needle!r} within {within} s: {''.join(seen)}") from None


async def test_a_waiting_line_names_the_failed_attempt_and_ctrl_c_offers_the_resend(
    down: CliEnv,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        STATECORE,
        *down.options,
        "chat",
        down.agent,
        "waiting",
        "--turn-id",
        "cli-waiting-1",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_environment(),
    )
    try:
        assert proc.stdin is not None and proc.stderr is not None and proc.stdout is not None
        proc.stdin.write(b"is anyone there?\n")
        await proc.stdin.drain()  # stdin stays open: chat waits for this line's answer

        waited = await _read_until(proc.stderr, "the model call failed", SEES_FAILURE_WITHIN)
        assert "attempt" in waited and "ModelUnavailable" in waited, waited

        # Meanwhile the Web UI's current details name the turn being answered.
        handle = down.env.sessions.handle(down.agent, "waiting")
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert "answering turn cli-waiting-1" in metadata.current_details, metadata

        # And `statecore describe` (the operator's view) shows the same failed attempt.
        # (Between two attempts Temporal may briefly hold no failure: asked until it does.)
        async def described() -> str | None:
            done = await down.run("--json", "describe", down.agent, "waiting", within=60)
            assert done.code == 0, done.err
            waiting: str | None = done.json().get("waiting_on")
            return waiting

        assert "the model call failed" in await eventually(described, within=30)
        shown = await down.run("describe", down.agent, "waiting", within=60)
        assert "waiting on: the model call failed (attempt" in shown.out, shown.out

        proc.send_signal(signal.SIGINT)
        rest = (await asyncio.wait_for(proc.stderr.read(), 30)).decode()
        code = await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == EXIT_INTERRUPTED, (code, rest)
    assert "gave up waiting for turn cli-waiting-1" in rest, rest
    assert "--turn-id cli-waiting-1 --resend 'is anyone there?'" in rest, rest
    assert "Traceback" not in rest, rest
    assert (await proc.stdout.read()) == b""  # no reply was printed
