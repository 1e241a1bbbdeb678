"""``statecore --json chat`` while the Temporal server itself is stopped and started again.

The typed line is in flight (its turn inside a slow model call) when the dev server process
is stopped; it stays down longer than the SDK's own retries last, so the chat meets refused
connections and broken calls, and then the server comes back on the same port with the
same database file. The line must be answered and stored exactly once; stdout carries only
the JSON documents and stderr one status line, not a screen of retry warnings.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from pathlib import Path

import pytest

from statecore.temporal._devserver import DevServer, free_port
from tests.cli.conftest import STATECORE, cli_environment
from tests.dbs import fresh_database
from tests.temporal.worker_kill import (
    ROOT,
    assert_exactly_once,
    sql_messages,
    start_worker,
    wait_for_file,
)

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

#: Longer than the SDK core's own retries of a refused connection (~10 s), so the refusals
#: reach statecore's retry loop.
OUTAGE_SECONDS = 15.0


async def read_turn(chat: asyncio.subprocess.Process, within: float) -> dict:
    assert chat.stdout is not None
    line = await asyncio.wait_for(chat.stdout.readline(), within)
    assert line, "chat ended without replying"
    return json.loads(line)  # stdout holds JSON documents and nothing else


async def test_a_line_sent_across_a_server_restart_is_answered_and_stored_once(
    tmp_path: Path,
) -> None:
    server = DevServer(
        port=free_port(),
        ui_port=None,
        db_filename=str(tmp_path / "temporal.db"),
        log_path=str(tmp_path / "temporal.log"),
    )
    await server.start()
    queue = f"restart-{uuid.uuid4().hex[:8]}"
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    worker = chat = None
    try:
        async with fresh_database("sqlite", "restart") as url:
            # Each model call takes 6 s: the server stops while turn 2 is inside one.
            worker = start_worker(server.address, queue, url, tmp_path, delay=6.0)
            await wait_for_file(tmp_path / "worker-ready", within=60)
            chat = await asyncio.create_subprocess_exec(
                STATECORE,
                "--address",
                server.address,
                "--task-queue",
                queue,
                "--json",
                "chat",
                agent,
                "s",
                "--model-heartbeat-seconds",
                "2",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=cli_environment(),
                cwd=ROOT,
            )
            assert chat.stdin is not None and chat.stderr is not None
            chat.stdin.write(b"first line\n")
            first = await read_turn(chat, 90)
            assert first["turn"] == 1

            chat.stdin.write(b"second line\n")
            await chat.stdin.drain()
            await wait_for_file(tmp_path / "model-calls", lines=2)  # turn 2 is in the model
            server.stop(kill=True)
            await asyncio.sleep(OUTAGE_SECONDS)
            await server.start(ready_within=90)  # same port, same database file

            second = await read_turn(chat, 240)
            assert second["turn"] == 2 and not second["duplicate"]
            assert "user messages: 2," in second["reply"]["content"]
            chat.stdin.close()
            assert await asyncio.wait_for(chat.wait(), 30) == 0
            assert chat.stdout is not None
            assert (await chat.stdout.read()).strip() == b""
            err = (await chat.stderr.read()).decode()

            rows = await sql_messages(url, agent, "s")
            assert_exactly_once(rows, [first["turn_id"], second["turn_id"]])
            assert [m.content for m in rows if m.role == "user"] == ["first line", "second line"]
    finally:
        if chat is not None and chat.returncode is None:
            chat.kill()
            await chat.wait()
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=10)
        server.stop()
    # One status line per reason it waited, not one warning per retry; no colour codes.
    assert "waiting for the answer: Temporal is unreachable" in err, err
    assert "WARN" not in err and "\x1b[" not in err, err
    assert len(err.splitlines()) <= 4, err


def test_a_call_broken_under_it_is_retried_with_the_same_turn_id() -> None:
    """The refusal the SDK reports when the connection breaks mid-call ("transport error",
    status UNKNOWN) is waited out like a refused connection, not reported as final."""
    from temporalio.service import RPCError, RPCStatusCode

    from statecore.temporal._client import _refusal_reason, _transient

    broken = RPCError("transport error", RPCStatusCode.UNKNOWN, b"")
    assert _transient(broken)
    assert _refusal_reason(broken) == "Temporal is unreachable"
    assert not _transient(RPCError("bad request", RPCStatusCode.INVALID_ARGUMENT, b""))
    assert not _transient(RPCError("something else", RPCStatusCode.UNKNOWN, b""))
