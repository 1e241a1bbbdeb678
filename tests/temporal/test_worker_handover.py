"""A session that took its turns on a worker of an earlier release takes its next turns on a
worker of this code, with no session noticing.

Sessions are long-running workflows: an upgrade replaces the worker under running sessions.
Here the earlier release is the code of commit EARLIER (before the package was regrouped
into private modules), taken from this repository's history with ``git archive`` and run as
its own processes (its worker and its ``statecore chat``). It opens a session and answers two
turns; its worker stops; a worker of this code, a new process with an empty cache, replays
the session's history and answers the next turns, and an operator signal reaches it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from statecore.temporal._devserver import DevServer
from tests.cli.conftest import cli_environment, statecore
from tests.dbs import fresh_database
from tests.worker_cli import REPO, base_env, worker_cli

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

#: The last commit before the regrouping (modules public, ``statecore.cli.app``): its
#: workflows, activities, signals and queries are the names running sessions hold.
EARLIER = "207edc1"
#: ``-P``: the earlier tree on PYTHONPATH is found before this checkout (the working folder).
EARLIER_PROGRAM = ("python", "-P", "-c", "from statecore.cli import main; main()")


@pytest.fixture(scope="module")
def earlier_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("earlier-release")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", EARLIER, "statecore"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert archive.returncode == 0, (
        f"commit {EARLIER} is not in this clone's history: {archive.stderr.decode()}"
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    # The earlier tree is what the program imports (this checkout has no statecore.cli.app).
    probe = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            "import statecore.cli.app, statecore; print(statecore.__file__)",
        ],
        env={**base_env(), "PYTHONPATH": str(folder)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip().startswith(str(folder)), probe
    return folder


async def _earlier_chat(
    tree: Path, options: list[str], agent: str, session: str, *lines: str
) -> list[str]:
    """The earlier release's ``statecore --json chat``: one reply per line."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *EARLIER_PROGRAM[1:],
        *options,
        "--json",
        "chat",
        agent,
        session,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**cli_environment(), "PYTHONPATH": str(tree)},
        cwd=tree,
    )
    out, err = await asyncio.wait_for(proc.communicate("\n".join(lines).encode() + b"\n"), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    return [json.loads(line)["reply"]["content"] for line in out.decode().splitlines() if line]


async def test_a_session_moves_from_an_earlier_release_worker_to_this_one(
    dev_server: DevServer, earlier_tree: Path, tmp_path: Path
) -> None:
    queue = f"handover-{uuid.uuid4().hex[:8]}"
    agent, session = "support-bot", f"customer-{uuid.uuid4().hex[:6]}"
    async with fresh_database("sqlite", "handover") as url:
        options = ["--address", dev_server.address, "--task-queue", queue, "--database-url", url]
        worker_args = ["worker", *options]

        earlier_env = {**base_env(), "PYTHONPATH": str(earlier_tree)}
        async with worker_cli(
            worker_args, earlier_env, tmp_path / "earlier.log", command=EARLIER_PROGRAM
        ):
            replies = await _earlier_chat(
                earlier_tree, options, agent, session, "hello", "how are you?"
            )
        assert len(replies) == 2, replies
        assert replies[0].endswith('You said: "hello"'), replies
        assert replies[1].endswith('You said: "how are you?"'), replies
        # The offline model says what context it was given: two user messages, three in all.
        assert "user messages: 2, messages: 3" in replies[1], replies

        async with worker_cli(
            worker_args, base_env(), tmp_path / "this.log", command=("statecore",)
        ):
            third = await statecore(*options, "--json", "chat", agent, session, stdin="third\n")
            assert third.code == 0, third.err
            [answered] = third.json_lines()
            assert answered["turn"] == 3, answered
            # The whole conversation is its context: nothing was lost in the hand-over.
            content = answered["reply"]["content"]
            assert content.endswith('You said: "third"'), content
            assert "user messages: 3, messages: 5" in content, content

            paused = await statecore(*options, "--json", "pause", agent, session)
            assert paused.code == 0, paused.err
            described = await statecore(*options, "--json", "describe", agent, session)
            assert described.code == 0, described.err
            checkpoint = described.json()["checkpoint"]
            assert checkpoint["turn"] == 3 and checkpoint["status"] == "paused", checkpoint
            assert checkpoint["message_count"] == 6, checkpoint
        log = (tmp_path / "this.log").read_text(errors="replace")
        # A history the new code could not replay fails its workflow task, which the worker logs.
        assert "nondetermin" not in log.lower(), log[-3000:]
        assert "Failed activation" not in log, log[-3000:]
