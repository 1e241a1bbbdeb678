"""docs/google_adk.md's third example, an ADK agent as a durable turn, prints what the doc
says on a real dev server (tests/temporal/test_docs_run.py runs every block; this one also
checks the printed reply and what the turn stored)."""

from __future__ import annotations

import asyncio
import re
import sys
import uuid
from pathlib import Path

import pytest

from statecore.integrations.google_adk import StatecoreSessionService
from statecore.temporal._devserver import DevServer
from tests.integrations.google_adk.test_docs import python_blocks
from tests.temporal.test_docs_run import end_sessions_left_on
from tests.worker_cli import REPO, base_env

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(300)]


async def test_the_turn_example_prints_its_reply(dev_server: DevServer, tmp_path: Path) -> None:
    code = python_blocks()[2]
    expected = re.search(r"print\(result\.turn, result\.reply\.content\)  # (.*)\n", code)
    assert expected is not None
    script = tmp_path / "turn.py"
    script.write_text(code)
    queue = f"docs-adk-{uuid.uuid4().hex[:8]}"
    url = f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}"
    env = {
        **base_env(),
        "PYTHONPATH": str(REPO),
        "TEMPORAL_ADDRESS": dev_server.address,
        "STATECORE_DATABASE_URL": url,
        "STATECORE_TASK_QUEUE": queue,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 240)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await end_sessions_left_on(dev_server, queue)
    assert proc.returncode == 0, out.decode()[-3000:]
    assert out.decode().strip().splitlines()[-1] == expected.group(1)
    service = StatecoreSessionService(database_url=url)
    try:
        session = await service.get_session(
            app_name="support", user_id="alice", session_id="chat-1"
        )
        assert session is not None and len(session.events) == 4
        assert await service.get_user_state(app_name="support", user_id="alice") == {
            "last_city": "Oslo"
        }
    finally:
        await service.close()
