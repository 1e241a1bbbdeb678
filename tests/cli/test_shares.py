"""``statecore shares list`` and ``statecore shares revoke``: an operator sees a grant and
who used it, revokes it by share id, and the token is refused from then on."""

from __future__ import annotations

import pytest

from statecore.contract._activities import CommitTurnInput, StateOp
from statecore.contract._shares import ShareChanges, SharedWriteOp, ShareGrantOp
from statecore.core._errors import ShareRevokedError
from statecore.core._models import SessionRef
from statecore.operations._shares import new_token, read_shared_state
from statecore.operations._turn_commit import commit_turn
from statecore.store._feed import read_events
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.cli.conftest import assert_one_line_error, statecore
from tests.dbs import fresh_database


async def test_operator_lists_and_revokes_a_share() -> None:
    owner = SessionRef(namespace="ops", agent_id="planner", session_id="p1")
    user = SessionRef(namespace="ops", agent_id="writer", session_id="w1")
    ticket = new_token()
    async with fresh_database("sqlite", "shares-cli") as url:
        await upgrade_database(url)
        store = await SqlStateStore.connect(url)
        try:
            async with store.transaction() as tx:
                await commit_turn(
                    tx,
                    CommitTurnInput(
                        ref=owner,
                        turn_id="t1",
                        turn=1,
                        state=StateOp(state={"steps": []}),
                        shares=ShareChanges(
                            grants=[ShareGrantOp(token=ticket.token, kind="state")]
                        ),
                    ),
                )
            async with store.transaction() as tx:
                use = ShareChanges(writes=[SharedWriteOp(token=ticket.token, op="use")])
                await commit_turn(tx, CommitTurnInput(ref=user, turn_id="t1", turn=1, shares=use))
            base = ["--database-url", url, "--state-namespace", "ops", "--json"]

            listed = await statecore(*base, "shares", "list")
            assert listed.code == 0, listed.err
            [row] = listed.json()
            assert row["share_id"] == ticket.share_id and row["access"] == "read"
            assert [(r["agent_id"], r["turns"]) for r in row["redemptions"]] == [("writer", 1)]
            assert ticket.token not in listed.out and "token_sha256" not in row

            async with store.transaction(read_only=True) as tx:
                before = await tx.events.last_seq("ops")
            revoked = await statecore(*base, "shares", "revoke", ticket.share_id)
            assert revoked.code == 0, revoked.err
            assert revoked.json()["revoked_by"] == "operator"
            # The revocation is in the feed, as the owner's `share` event, exactly once.
            [event] = await read_events(store, "ops", after=before)
            assert (event.kind, event.agent_id, event.session_id) == ("share", "planner", "p1")
            assert event.detail["revoked"] == [ticket.share_id]
            async with store.transaction(read_only=True) as tx:
                with pytest.raises(ShareRevokedError):
                    await read_shared_state(tx, "ops", ticket.token)

            unknown = await statecore(*base, "shares", "revoke", "0" * 24)
            assert_one_line_error(unknown, 3)
            assert unknown.error()["code"] == "ShareTokenUnknown"
            assert await read_events(store, "ops", after=event.seq) == []  # refused: none
            # Another namespace does not see the grant at all.
            other = await statecore(
                "--database-url", url, "--state-namespace", "elsewhere", "--json", "shares", "list"
            )
            assert other.code == 0 and other.json() == []
        finally:
            await store.close()
