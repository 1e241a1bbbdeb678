"""``statecore events --follow --json``: a host pipes the change feed as JSON lines, and sees
a change committed while it follows; ``statecore events sweep`` trims it."""

from __future__ import annotations

import asyncio
import json

from statecore.contract.activities import CommitTurnInput
from statecore.core.models import Message, SessionRef
from statecore.core.turn_commit import commit_turn
from statecore.store.migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.cli.conftest import statecore
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
            follow = asyncio.create_task(
                statecore(
                    *base, "events", "--follow", "--poll-interval", "0.1", "--idle-timeout", "20"
                )
            )
            # The follower starts, prints seq 1, then prints turn 2 when it commits (the
            # store tests prove the live delivery; this one the command and its output).
            await asyncio.sleep(8)
            await _turn(store, 2)
            done = await asyncio.wait_for(follow, 120)
            assert done.code == 0, done.err
            lines = [json.loads(line) for line in done.out.splitlines()]
            assert [(e["seq"], e["kind"], e["turn_id"]) for e in lines] == [
                (1, "messages", "t1"),
                (2, "messages", "t2"),
            ]
            assert "secret-words" not in done.out  # ids and sizes, never content

            swept = await statecore(*base, "events", "sweep", "--keep", "1")
            assert swept.code == 0 and swept.json() == {"removed": 1}
            rest = await statecore(*base, "events")
            assert [json.loads(line)["seq"] for line in rest.out.splitlines()] == [2]
        finally:
            await store.close()
