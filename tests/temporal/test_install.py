"""statecore installed from a built wheel into an application laid out like Temporal's samples.

The application has its own ``activities.py`` and its own ``workflows`` package, the names
Temporal's tutorials use. An installed statecore must neither shadow them nor be shadowed by
them: the wheel claims the import name ``statecore`` and nothing else. The application runs
one worker with its own workflow and activity next to ``StatecorePlugin``, imports only
statecore's public face, and drives an AgentSession turn and a run of its own workflow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from statecore.temporal._devserver import DevServer

pytestmark = [pytest.mark.slow, pytest.mark.temporal]

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).with_name("uv")

ACTIVITIES_PY = """
from temporalio import activity


@activity.defn
async def shout(text: str) -> str:
    return text.upper() + "!"
"""

WORKFLOWS_INIT_PY = """
from workflows.greeting import Greeting

__all__ = ["Greeting"]
"""

GREETING_PY = """
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import shout


@workflow.defn
class Greeting:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            shout, f"hello {name}", start_to_close_timeout=timedelta(seconds=10)
        )
"""

APP_PY = '''
"""The application's own worker, with statecore's plugin beside its own code."""
import asyncio
import importlib.metadata
import json
import sys

from temporalio.client import Client
from temporalio.worker import Worker

import activities
import workflows
from statecore import AgentSessionClient, StatecorePlugin, __version__

from activities import shout
from workflows import Greeting


async def main(address: str, task_queue: str, database_url: str) -> None:
    plugin = StatecorePlugin(database_url)
    client = await Client.connect(address, plugins=[plugin])
    async with Worker(
        client, task_queue=task_queue, workflows=[Greeting], activities=[shout]
    ):
        own = await client.execute_workflow(
            Greeting.run, "temporal", id=f"greeting-{task_queue}", task_queue=task_queue
        )
        sessions = AgentSessionClient(client, task_queue=task_queue)
        turn = await sessions.send("install-agent", "s1", "hello from an application")
    files = importlib.metadata.files("statecore") or []
    print(json.dumps({
        "own_workflow": own,
        "turn": turn.turn,
        "reply": turn.reply.content,
        "version": __version__,
        "activities_file": activities.__file__,
        "workflows_file": workflows.__file__,
        "top_level": sorted({str(f).split("/")[0] for f in files}),
    }))


asyncio.run(asyncio.wait_for(main(*sys.argv[1:4]), timeout=120))
'''


def _run(args: list[str], *, timeout: float, cwd: Path | None = None) -> str:
    """Run ``args``; on failure or time-out the assertion shows what it printed."""
    try:
        done = subprocess.run(
            args,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": ""},
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{args[:3]} did not finish in {timeout}s: {exc.output}") from exc
    assert done.returncode == 0, f"{args[:3]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with statecore installed from a wheel built from the
    checkout (not editable)."""
    if not UV.exists():
        pytest.skip(f"uv not found beside {sys.executable}: run scripts/setup.sh test")
    base = tmp_path_factory.mktemp("install")
    wheels = base / "wheels"
    _run([str(UV), "build", "--wheel", "--out-dir", str(wheels), str(ROOT)], timeout=300)
    (wheel,) = wheels.glob("statecore-*.whl")
    venv = base / "venv"
    _run([str(UV), "venv", "--python", sys.executable, str(venv)], timeout=120)
    python = venv / "bin" / "python"
    _run([str(UV), "pip", "install", "--python", str(python), str(wheel)], timeout=300)
    return python


def test_the_wheel_holds_only_the_statecore_package(installed_python: Path) -> None:
    listing = _run(
        [
            str(installed_python),
            "-c",
            "import importlib.metadata, json; "
            "print(json.dumps(sorted({str(f).split('/')[0] "
            "for f in importlib.metadata.files('statecore')})))",
        ],
        timeout=60,
        cwd=installed_python.parent,
    )
    top = set(json.loads(listing))
    packages = {name for name in top if not name.endswith(".dist-info") and name != ".."}
    assert packages == {"statecore"}, top


def test_an_application_with_its_own_workflows_and_activities_runs_beside_statecore(
    installed_python: Path, dev_server: DevServer, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    (app / "workflows").mkdir(parents=True)
    (app / "activities.py").write_text(textwrap.dedent(ACTIVITIES_PY))
    (app / "workflows" / "__init__.py").write_text(textwrap.dedent(WORKFLOWS_INIT_PY))
    (app / "workflows" / "greeting.py").write_text(textwrap.dedent(GREETING_PY))
    (app / "app.py").write_text(textwrap.dedent(APP_PY))
    task_queue = f"install-{uuid.uuid4().hex[:8]}"
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'statecore.db'}"

    out = _run(
        [str(installed_python), "app.py", dev_server.address, task_queue, database_url],
        timeout=180,
        cwd=app,
    )
    result = json.loads(out.strip().splitlines()[-1])

    assert result["own_workflow"] == "HELLO TEMPORAL!"
    assert result["turn"] == 1
    assert result["reply"].strip()
    assert Path(result["activities_file"]) == app / "activities.py"
    assert Path(result["workflows_file"]) == app / "workflows" / "__init__.py"
    packages = {n for n in result["top_level"] if not n.endswith(".dist-info") and n != ".."}
    assert packages == {"statecore"}
    # The installed copy, not the checkout, answered.
    assert "site-packages" in _run(
        [str(installed_python), "-c", "import statecore; print(statecore.__file__)"],
        timeout=60,
        cwd=app,
    )
