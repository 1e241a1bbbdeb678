"""Revision 0006 moves turn records out of the KV table into ``statecore_turn_records``, and
its downgrade moves them back in the object layout earlier releases read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import column, select, table
from sqlalchemy.ext.asyncio import AsyncConnection

from statecore.contract._activities import CommitTurnInput, CommitTurnResult
from statecore.core._models import Message, SessionRef
from statecore.operations._turn_commit import commit_turn, find_turn
from statecore.operations._turn_record import expanded_record
from statecore.store import open_store
from statecore.store._migrate import HEAD_REVISION, upgrade_database
from statecore.store.sql._engine import create_store_engine
from statecore.store.sql._types import UtcDateTime, medium_blob
from tests.dbs import fresh_database
from tests.store.migration_helpers import ALL, downgrade

BEFORE = "0005_shares_and_events"
REF = SessionRef(namespace="moved", agent_id="agent", session_id="s1")
SIBLING = SessionRef(namespace="moved", agent_id="agent", session_id="s2")
#: Same agent and session ids in another namespace: owners match only within a namespace.
ELSEWHERE = SessionRef(namespace="other", agent_id="agent", session_id="s1")
AT = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)

KV = table(
    "statecore_kv_entries",
    column("namespace"),
    column("owner"),
    column("bucket"),
    column("key"),
    column("kind"),
    column("value", medium_blob()),
    column("revision"),
    column("created_at", UtcDateTime()),
    column("updated_at", UtcDateTime()),
    column("expires_at", UtcDateTime()),
)
#: A record as the release before 0006 wrote it: the object layout, reply in the log.
PREVIOUS_RELEASE = {
    "turn": 9,
    "first_seq": 1,
    "last_seq": 2,
    "message_count": 2,
    "token_total": 40,
    "window_tokens": 40,
    "result": {"usage": {"prompt_tokens": 30}, "context_tokens": 31, "reply_seq": 2},
}


def _turn(ref: SessionRef, n: int) -> CommitTurnInput:
    return CommitTurnInput(
        ref=ref,
        turn_id=f"turn-{n}",
        turn=n,
        messages=[
            Message(role="user", content=f"question {n} of {ref}"),
            Message(role="assistant", content=f"answer {n} of {ref}"),
        ],
        result={"reply": {"role": "assistant", "content": f"answer {n} of {ref}"}},
    )


def _kv_row(namespace: str, owner: str, bucket: str, key: str, value: Any) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "owner": owner,
        "bucket": bucket,
        "key": key,
        "kind": "json",
        "value": json.dumps(value).encode(),
        "revision": 1,
        "created_at": AT,
        "updated_at": AT,
        "expires_at": None,
    }


async def _on(url: str, work: Any) -> Any:
    engine = create_store_engine(url)
    try:
        async with engine.begin() as conn:
            return await work(conn)
    finally:
        await engine.dispose()


async def _turn_kv_rows(url: str) -> dict[tuple[str, str, str], Any]:
    async def read(conn: AsyncConnection) -> dict[tuple[str, str, str], Any]:
        c = KV.c
        rows = await conn.execute(
            select(c.namespace, c.owner, c.key, c.value).where(c.bucket == "turn")
        )
        return {(row.namespace, row.owner, row.key): json.loads(bytes(row.value)) for row in rows}

    return await _on(url, read)


async def _results(url: str, refs: list[SessionRef]) -> dict[tuple[str, str], Any]:
    """Every turn's duplicate answer, by (session, turn id)."""
    store = await open_store(url)
    try:
        found: dict[tuple[str, str], CommitTurnResult | None] = {}
        async with store.transaction() as tx:
            for ref in refs:
                for turn_id, _ in await tx.turns.records(ref):
                    found[(ref.session_id + "@" + ref.namespace, turn_id)] = await find_turn(
                        tx, ref, turn_id
                    )
        return found
    finally:
        await store.close()


@pytest.mark.parametrize("dialect", ALL)
async def test_turn_records_move_between_the_kv_table_and_their_own(dialect: str) -> None:
    async with fresh_database(dialect, "turns") as url:
        store = await open_store(url, migrate=True)
        try:
            async with store.transaction() as tx:
                for ref in (REF, SIBLING, ELSEWHERE):
                    for n in (1, 2):
                        await commit_turn(tx, _turn(ref, n))
                compact = {
                    (ref, turn_id): value
                    for ref in (REF, SIBLING, ELSEWHERE)
                    for turn_id, value in await tx.turns.records(ref)
                }
        finally:
            await store.close()
        answers = await _results(url, [REF, SIBLING, ELSEWHERE])
        assert len(answers) == 6 and all(a is not None and a.duplicate for a in answers.values())

        # Down: every record is a KV row of its session's "turn" bucket, in the object layout.
        await downgrade(url, BEFORE)
        moved_out = await _turn_kv_rows(url)
        assert moved_out == {
            (ref.namespace, ref.owner, turn_id): expanded_record(value)
            for (ref, turn_id), value in compact.items()
        }

        # What the release before 0006 left besides: a record in its own words, a user bucket
        # that extends the name "turn", a record of no session.
        await _on(
            url,
            lambda conn: conn.execute(
                KV.insert(),
                [
                    _kv_row(REF.namespace, REF.owner, "turn", "legacy", PREVIOUS_RELEASE),
                    _kv_row(REF.namespace, REF.owner, "turnip", "k", 1),
                    _kv_row(REF.namespace, "ghost/gone", "turn", "turn-1", {"turn": 1}),
                ],
            ),
        )

        # Up: the records are rows of statecore_turn_records again, as the KV rows held them.
        assert await upgrade_database(url) == HEAD_REVISION
        assert await _turn_kv_rows(url) == {
            (REF.namespace, "ghost/gone", "turn-1"): {"turn": 1},  # owned by no session: stays
        }
        store = await open_store(url)
        try:
            async with store.transaction() as tx:
                assert await tx.turns.records(REF) == [
                    ("legacy", PREVIOUS_RELEASE),
                    ("turn-1", expanded_record(compact[(REF, "turn-1")])),
                    ("turn-2", expanded_record(compact[(REF, "turn-2")])),
                ]
                assert await tx.turns.count(SIBLING) == await tx.turns.count(ELSEWHERE) == 2
                assert await tx.kv.get(REF.kv_scope, "turnip", "k") is not None
                assert await tx.kv.get(REF.kv_scope, "turn.meta", "latest") is not None
                legacy = await find_turn(tx, REF, "legacy")
        finally:
            await store.close()
        assert legacy is not None and legacy.turn == 9
        assert legacy.result is not None and legacy.result.reply.content == f"answer 1 of {REF}"
        assert legacy.result.context_tokens == 31
        # Every turn answers a re-send exactly as it did before the round trip.
        again = await _results(url, [REF, SIBLING, ELSEWHERE])
        assert {key: again[key] for key in answers} == answers
