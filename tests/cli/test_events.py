"""``statecore events --follow --json``: a host pipes the change feed as JSON lines, and sees
a change committed while it follows; ``statecore events sweep`` trims it."""

from __future__ import annotations

import asyncio
import json

from statecore.contract._activities import CommitTurnInput
from statecore.core._models import Message, SessionRef
from statecore.operations._turn_commit import commit_turn
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.cli.conftest import STATECORE, cli_environment, statecore
from tests.dbs import fresh_database

REF = SessionRef(namespace="feed", agent_id="planner", session_id="p1")


async def _turn(store: SqlStateStore, n: int) -> None:
    async with store.transaction() as tx:
        await commit_turn(
            tx,
            CommitTurnInput(
                ref=REF,
                turn_id=f"t{n}",
                turn=n,
                messages=[Message(role="user", content="secret-words")],
            ),
        )


async def test_follow_prints_json_lines_of_committed_changes() -> None:
    async with fresh_database("sqlite", "events-cli") as url:
        await upgrade_database(url)
        store = await SqlStateStore.connect(url)
        try:
            await _turn(store, 1)
            base = ["--database-url", url, "--state-namespace", "feed", "--json"]
            follow = await asyncio.create_subprocess_exec(
                STATECORE,
                *base,
                "events",
                "--follow",
                "--poll-interval",
                "0.1",
                "--idle-timeout",
                "3",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=cli_environment(),
            )
            assert follow.stdout is not None
            try:
                # A host reading the pipe sees each change as it commits: seq 1 first, then
                # turn 2, committed only once the follower has printed seq 1 (the store tests
                # prove the live delivery; this one the command, its output and its flushing).
                first = await asyncio.wait_for(follow.stdout.readline(), 60)
                await _turn(store, 2)
                second = await asyncio.wait_for(follow.stdout.readline(), 60)
                tail, err = await asyncio.wait_for(follow.communicate(), 60)
            finally:
                if follow.returncode is None:
                    follow.kill()
                    await follow.wait()
            assert follow.returncode == 0, err.decode()
            out = (first + second + tail).decode()
            lines = [json.loads(line) for line in out.splitlines()]
            assert [(e["seq"], e["kind"], e["turn_id"]) for e in lines] == [
                (1, "messages", "t1"),
                (2, "messages", "t2"),
            ]
            assert "secret-words" not in out  # ids and sizes, never content

            swept = await statecore(*base, "events", "sweep", "--keep", "1")
            assert swept.code == 0 and swept.json() == {"removed": 1}
            rest = await statecore(*base, "events")
            assert [json.loads(line)["seq"] for line in rest.out.splitlines()] == [2]
        finally:
            await store.close()
