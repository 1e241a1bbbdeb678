"""The turn benchmark's state-only turns (bench/harness/state_turns.py) do what they claim:
each commits one KV put and one message through the turn API, and the reading variant reads
first. The check lives with the harness (``python -m bench.harness.checks state-turns``) and
runs here as a process against the suite's dev server: tests never import bench."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from statecore.temporal._devserver import DevServer

pytestmark = pytest.mark.temporal

ROOT = Path(__file__).resolve().parents[2]


async def test_state_only_turns_commit_a_kv_put_and_a_message(dev_server: DevServer) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.harness.checks",
        "state-turns",
        "--address",
        dev_server.address,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert out.decode().strip() == "ok state-turns"
