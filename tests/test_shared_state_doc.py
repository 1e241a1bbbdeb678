"""docs/shared_state.md's two-agent example runs as written: its two program blocks are saved
under the names they give themselves and run against a real Temporal dev server."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.temporal.conftest import dev_server
from tests.worker_cli import empty_config_home

__all__ = ["dev_server"]

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "shared_state.md"
PROGRAM = re.compile(r"```python\n# (\w+\.py)\n(.*?)```", re.S)

pytestmark = pytest.mark.temporal


def test_the_doc_names_its_two_programs() -> None:
    assert [name for name, _ in PROGRAM.findall(DOC.read_text())] == [
        "plan_agents.py",
        "run_plan_example.py",
    ]


async def test_the_two_agent_example_runs_as_written(dev_server: DevServer, tmp_path: Path) -> None:
    for name, code in PROGRAM.findall(DOC.read_text()):
        (tmp_path / name).write_text(f"# {name}\n{code}")
    async with fresh_database("sqlite", "doc") as url:
        env = {
            **{
                k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "STATECORE_"))
            },
            "TEMPORAL_ADDRESS": dev_server.address,
            "STATECORE_DATABASE_URL": url,
            "XDG_CONFIG_HOME": empty_config_home(),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "run_plan_example.py",
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 180)
    text = out.decode()
    assert proc.returncode == 0, err.decode()[-3000:]
    assert "plan after the writer's turn: ['outline', 'draft']" in text
    feed = [line.split()[1:3] for line in text.splitlines()[1:]]
    assert ["state", "planner"] in feed and ["share", "planner"] in feed
    assert ["share", "writer"] in feed
