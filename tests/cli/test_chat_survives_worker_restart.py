"""``statecore chat`` driven through stdin while its worker is killed and restarted."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from pathlib import Path

import pytest

from statecore.temporal._devserver import DevServer
from tests.cli.conftest import STATECORE, cli_environment
from tests.dbs import fresh_database
from tests.temporal.worker_kill import (
    ROOT,
    assert_exactly_once,
    kill_all,
    sql_messages,
    start_worker,
    wait_for_file,
)

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def read_turn(chat: asyncio.subprocess.Process, within: float) -> dict:
    assert chat.stdout is not None
    line = await asyncio.wait_for(chat.stdout.readline(), within)
    assert line, "chat ended without replying"
    return json.loads(line)


async def test_chat_goes_on_across_a_killed_worker_and_stores_each_message_once(
    dev_server: DevServer, tmp_path: Path
) -> None:
    queue = f"cli-restart-{uuid.uuid4().hex[:8]}"
    agent, session = f"agent-{uuid.uuid4().hex[:8]}", "restart"
    async with fresh_database("sqlite", "clichat") as url:
        # The model takes 3 s a call, so the kill lands inside the second turn's model call.
        worker = start_worker(dev_server.address, queue, url, tmp_path, delay=3.0)
        replacement = None
        chat = None
        try:
            await wait_for_file(tmp_path / "worker-ready")
            chat = await asyncio.create_subprocess_exec(
                STATECORE,
                "--address",
                dev_server.address,
                "--task-queue",
                queue,
                "--json",
                "chat",
                agent,
                session,
                "--model-heartbeat-seconds",
                "2",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=cli_environment(),
                cwd=ROOT,
            )
            assert chat.stdin is not None
            chat.stdin.write(b"first line\n")
            first = await read_turn(chat, 60)
            assert first["turn"] == 1

            chat.stdin.write(b"second line\n")
            await chat.stdin.drain()
            await wait_for_file(tmp_path / "model-calls", lines=2)  # turn 2 is in the model
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=10)
            replacement = start_worker(dev_server.address, queue, url, tmp_path, delay=0.2)
            second = await read_turn(chat, 120)
            assert second["turn"] == 2 and not second["duplicate"]
            assert "user messages: 2," in second["reply"]["content"]
            calls = (tmp_path / "model-calls").read_text().splitlines()
            assert len(calls) == 3, calls  # turn 2 ran again on the new worker

            chat.stdin.write(b"third line\n")
            third = await read_turn(chat, 60)
            assert third["turn"] == 3 and "user messages: 3," in third["reply"]["content"]
            chat.stdin.close()
            assert await asyncio.wait_for(chat.wait(), 30) == 0

            rows = await sql_messages(url, agent, session)
            assert_exactly_once(rows, [first["turn_id"], second["turn_id"], third["turn_id"]])
            assert [m.content for m in rows if m.role == "user"] == [
                "first line",
                "second line",
                "third line",
            ]
        finally:
            if chat is not None and chat.returncode is None:
                chat.kill()
                await chat.wait()
            kill_all(worker, replacement)
