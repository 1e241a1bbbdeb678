"""A reader that goes away is not an outage: ``statecore events | head -1`` ends quietly, and
so does every other command that prints more than a pipe holds (``export`` to stdout,
``describe --db --data``).

Run through a real shell pipeline, as a user types it; ``PIPESTATUS`` gives statecore's own
exit code. The reader closes after one line, while statecore still has lines to write."""

from __future__ import annotations

import asyncio
import shlex

import pytest

from statecore.cli._exits import EXIT_OK, EXIT_UNREACHABLE
from statecore.contract._activities import CommitTurnInput
from statecore.core._models import Message, SessionRef
from statecore.operations._turn_commit import commit_turn
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.cli.conftest import STATECORE, cli_environment
from tests.dbs import fresh_database

REF = SessionRef(namespace="pipe", agent_id="planner", session_id="p1")
TURNS = 400  # events enough to overflow the pipe's buffer after the reader has gone


async def _pipeline(command: str, reader: str = "head -1") -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        f'{command} | {reader}; echo "status=${{PIPESTATUS[0]}}" >&2',
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_environment(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    text = err.decode()
    status = int(text.rsplit("status=", 1)[1].strip())
    return status, out.decode(), text.rsplit("status=", 1)[0]


@pytest.fixture
async def feed_url() -> object:
    async with fresh_database("sqlite", "pipe-cli") as url:
        await upgrade_database(url)
        store = await SqlStateStore.connect(url)
        try:
            async with store.transaction() as tx:
                for n in range(1, TURNS + 1):
                    await commit_turn(
                        tx,
                        CommitTurnInput(
                            ref=REF,
                            turn_id=f"t{n}",
                            turn=n,
                            messages=[Message(role="user", content="words " * 20)],
                        ),
                    )
        finally:
            await store.close()
        yield url


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
async def test_events_into_a_reader_that_stops_after_one_line_end_quietly(
    feed_url: str, as_json: bool
) -> None:
    flags = ["--json"] if as_json else []
    command = shlex.join(
        [STATECORE, "--database-url", feed_url, "--state-namespace", "pipe", *flags, "events"]
    )
    status, out, err = await _pipeline(command)
    assert len(out.splitlines()) == 1 and "seq" in out.lower(), out
    assert status == EXIT_OK, (status, err)
    assert err.strip() == "", err


async def test_a_real_outage_still_reports_itself() -> None:
    """The quiet ending is for the program's own output only: a database that cannot be
    reached is still an error with its exit code, pipe or no pipe."""
    command = shlex.join(
        [STATECORE, "--database-url", "sqlite:////nonexistent/dir/x.db", "--json", "events"]
    )
    status, _out, err = await _pipeline(command)
    assert status == EXIT_UNREACHABLE, err
    assert '"Unreachable"' in err or "Unreachable" in err


#: Commands that print the stored session (400 turns: over 150 KB, several pipe buffers)
#: from the database alone. A bundle is one line, so its reader stops after 1,000 bytes.
PRINTING = {
    "export": ["export", REF.agent_id, REF.session_id],
    "describe-data": ["describe", "--db", "--data", REF.agent_id, REF.session_id],
}
READERS = {"export": "head -c 1000"}


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
@pytest.mark.parametrize("command", sorted(PRINTING))
async def test_every_printing_command_ends_quietly_when_its_reader_goes(
    feed_url: str, command: str, as_json: bool
) -> None:
    flags = ["--json"] if as_json else []
    line = shlex.join(
        [STATECORE, "--database-url", feed_url, "--state-namespace", "pipe", *flags]
        + PRINTING[command]
    )
    status, out, err = await _pipeline(line, READERS.get(command, "head -1"))
    assert len(out.splitlines()) == 1 and len(out) <= 1000, out
    assert status == EXIT_OK, (status, err)
    assert err.strip() == "", err
