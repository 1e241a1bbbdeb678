"""Every `temporal` command in docs/operators.md, run in order against a real dev server.

The guide's CLI walkthrough is written to work top to bottom. A command marked
``# refused: TEXT`` must fail with TEXT in its error; one marked ``# shows: TEXT`` must print
TEXT; any other command must succeed. The server is this module's own, so list and count
results see only the guide's sessions.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from statecore.temporal._devserver import DevServer, find_temporal_binary
from tests.dbs import fresh_database
from tests.temporal.conftest import Env, logged_dev_server, running_env

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operators.md"
MARKER = re.compile(r"\s+#\s*(refused|shows):\s*(.+)$")
# Commands that only read: their output may lag a signal (visibility, continue-as-new).
READ_ONLY = {"list", "count", "query", "describe", "metadata"}

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


@dataclass
class Example:
    line: int
    argv: list[str]
    refused: str | None = None
    shows: str | None = None

    @property
    def subcommand(self) -> str:
        return self.argv[2] if len(self.argv) > 2 else ""

    def option(self, name: str) -> str | None:
        return self.argv[self.argv.index(name) + 1] if name in self.argv else None

    def __str__(self) -> str:
        return f"docs/operators.md line {self.line}: {shlex.join(self.argv)}"


def guide_examples(text: str) -> list[Example]:
    """The `temporal` commands of the guide's ```bash blocks, continuation lines joined."""
    examples: list[Example] = []
    in_bash, pending = False, ""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            in_bash = not in_bash and line.strip() == "```bash"
            continue
        if not in_bash:
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        command, pending = pending.strip(), ""
        if not command.startswith("temporal "):
            continue
        example = Example(line=number, argv=[])
        marker = MARKER.search(command)
        if marker:
            setattr(example, marker.group(1), marker.group(2).strip())
            command = command[: marker.start()]
        example.argv = shlex.split(command, comments=True)
        examples.append(example)
    return examples


@pytest.fixture(scope="module")
async def guide_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    async with logged_dev_server(tmp_path_factory.mktemp("temporal-guide")) as server:
        yield server


@pytest.fixture
async def guide_env(guide_server: DevServer) -> AsyncIterator[Env]:
    """Workers on `statecore` and on `statecore-v2`, the guide's migration target."""
    async with (
        fresh_database("sqlite", "guide") as url,
        running_env(guide_server, url, task_queue="statecore") as env,
        Worker(env.client, task_queue="statecore-v2"),
    ):
        yield env


def run_cli(example: Example, address: str) -> subprocess.CompletedProcess[str]:
    # Only the test server: no TEMPORAL_* setting of the caller's shell may redirect it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    env["TEMPORAL_ADDRESS"] = address
    argv = [find_temporal_binary(), *example.argv[1:]]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


async def settled(client: Client, workflow_id: str) -> None:
    """Wait until the session has processed what it was sent (no workflow task pending)."""
    handle = client.get_workflow_handle(workflow_id)
    for _ in range(200):
        description = await handle.describe()
        if not description.raw_description.HasField("pending_workflow_task"):
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"{workflow_id} still has a workflow task pending")


async def check(example: Example, env: Env) -> None:
    attempts = 50 if example.shows and example.subcommand in READ_ONLY else 1
    for _ in range(attempts):
        done = await asyncio.to_thread(run_cli, example, env.address)
        output = f"\nstdout: {done.stdout}\nstderr: {done.stderr}"
        if example.refused:
            assert done.returncode != 0, f"{example} should be refused{output}"
            assert example.refused in done.stderr, f"{example}{output}"
            return
        assert done.returncode == 0, f"{example}{output}"
        if not example.shows or example.shows in done.stdout:
            return
        await asyncio.sleep(0.2)
    pytest.fail(f"{example} never showed {example.shows!r}{output}")


def test_the_guide_has_a_cli_example_for_every_operation() -> None:
    examples = guide_examples(GUIDE.read_text(encoding="utf-8"))
    names = {e.option("--name") for e in examples} | {e.option("--update-name") for e in examples}
    signals = {"pause", "resume", "reset", "compact", "add_hint", "migrate", "close"}
    updates = {"send_message", "describe_state", "reset_state", "compact_state"}
    assert signals | updates | {"describe"} <= names
    assert {"start", "signal", "query", "update", "list", "count", "metadata"} <= {
        e.subcommand for e in examples
    }


async def test_every_cli_command_in_the_guide_works_in_order(guide_env: Env) -> None:
    examples = guide_examples(GUIDE.read_text(encoding="utf-8"))
    assert len(examples) >= 30
    for example in examples:
        await check(example, guide_env)
        workflow_id = example.option("--workflow-id")
        if example.subcommand == "signal" and workflow_id:
            await settled(guide_env.client, workflow_id)
