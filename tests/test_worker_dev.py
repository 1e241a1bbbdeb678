"""`python worker.py --dev`: the README's run command, exercised as a user would."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import free_port

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.temporal


async def test_worker_dev_serves_turns_and_the_web_ui(tmp_path: Path) -> None:
    port, ui_port = free_port(), free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "worker.py"),
            "--dev",
            "--port",
            str(port),
            "--ui-port",
            str(ui_port),
            "--data-dir",
            str(tmp_path / "data"),
            "--database-url",
            f"sqlite+aiosqlite:///{tmp_path / 'data' / 'statecore.db'}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        client = None
        for _ in range(120):
            try:
                client = await Client.connect(
                    f"127.0.0.1:{port}", data_converter=pydantic_data_converter
                )
                break
            except RuntimeError:
                await asyncio.sleep(0.5)
        assert client is not None, "dev server never came up"
        sessions = AgentSessionClient(client)
        result = await sessions.send("readme", "first", "hello", turn_id="t1")
        assert result.turn == 1 and "hello" in result.reply.content
        status = await asyncio.to_thread(_http_status, f"http://127.0.0.1:{ui_port}/")
        assert status == 200
        found = [w.id async for w in client.list_workflows("StatecoreAgentId = 'readme'")]
        assert found == ["agent-session:readme:first"]
        assert (tmp_path / "data" / "statecore.db").exists()
        assert (tmp_path / "data" / "temporal.db").exists()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out.decode()[-2000:]


def _http_status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as page:
        return page.status
