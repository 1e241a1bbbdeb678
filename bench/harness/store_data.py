"""The storage benchmark's conversations: generated realistic turns, a fast bulk seed, and the
checks that the seeded session is exactly what ``conversation.append`` would have built.

A million messages through ``append`` (one transaction each) would take hours, and one
``conversation.restore`` call would hold a million validated models in memory at once. So the
log is written with a bulk INSERT into the ``messages`` table, in batches, with rows built by
the backend's own row builder (``stored_columns``, the function ``append`` uses) and token
counts taken by the real TokenCounter. The session's counters (``last_seq``,
``message_count``, ``token_total``) are then set to match. ``verify_session`` proves the result
through the public API and one full consistency pass over the rows (seq 1..N without gaps,
each running total = the previous one + the message's tokens).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, text, update

from statecore.core._models import Message, SessionRef, ToolCall
from statecore.core._tokens import TokenCounter
from statecore.store import StateStore
from statecore.store.sql import SqlStateStore
from statecore.store.sql._message_rows import stored_columns
from statecore.store.sql._schema import messages as message_table
from statecore.store.sql._schema import sessions

#: Rows per INSERT batch (one transaction each), small enough to bound memory.
BATCH_ROWS = 20_000
#: Every 8th turn the assistant calls a tool: user, assistant(call), tool result, assistant.
TOOL_TURN_EVERY = 8
SYSTEM_PROMPT = (
    "You are a careful research assistant for an engineering team. Answer with the facts you "
    "have, say plainly what you do not know, and call the search tool before guessing."
)
HINT = "The user prefers short answers with one concrete next step."
_WORDS = (
    "the",
    "plan",
    "looks",
    "good",
    "but",
    "we",
    "should",
    "check",
    "latency",
    "numbers",
    "before",
    "release",
    "and",
    "compare",
    "them",
    "with",
    "last",
    "week",
    "results",
    "because",
    "database",
    "migration",
    "changed",
    "how",
    "index",
    "is",
    "built",
    "so",
    "queries",
    "that",
    "used",
    "to",
    "seek",
    "may",
    "now",
    "scan",
    "a",
    "larger",
    "range",
    "of",
    "rows",
    "team",
    "wants",
    "short",
    "summary",
    "risks",
    "owners",
    "date",
    "for",
    "next",
    "review",
    "storage",
    "layer",
    "including",
    "backups",
    "retention",
    "encryption",
    "cost",
    "per",
    "turn",
)
_BASE_TIME = datetime(2025, 1, 1, tzinfo=UTC)


def _sentence(rng: random.Random, words: int) -> str:
    picked = [rng.choice(_WORDS) for _ in range(words)]
    return " ".join(picked).capitalize() + "."


@dataclass(frozen=True)
class Templates:
    """A small pool of messages the generated log cycles through (token counts taken once)."""

    user: list[Message]
    assistant: list[Message]
    call: list[Message]
    result: list[Message]

    @classmethod
    def build(cls, seed: int = 7, size: int = 48) -> Templates:
        rng = random.Random(seed)

        def user() -> Message:
            return Message(role="user", content=_sentence(rng, rng.randint(12, 50)))

        def assistant() -> Message:
            return Message(role="assistant", content=_sentence(rng, rng.randint(30, 110)))

        def call(i: int) -> Message:
            args = f'{{"query": "{_sentence(rng, rng.randint(4, 10))}", "limit": 5}}'
            return Message(
                role="assistant",
                content="",
                tool_calls=[ToolCall(id=f"call_{i}", name="search_docs", arguments=args)],
            )

        def result(i: int) -> Message:
            return Message(
                role="tool", content=_sentence(rng, rng.randint(40, 120)), tool_call_id=f"call_{i}"
            )

        return cls(
            user=[user() for _ in range(size)],
            assistant=[assistant() for _ in range(size)],
            call=[call(i) for i in range(size)],
            result=[result(i) for i in range(size)],
        )

    def turn(self, number: int, messages_left: int) -> list[Message]:
        """The messages of turn ``number`` (never more than ``messages_left``)."""
        pick = number % len(self.user)
        if number % TOOL_TURN_EVERY == TOOL_TURN_EVERY - 1 and messages_left >= 4:
            return [self.user[pick], self.call[pick], self.result[pick], self.assistant[pick]]
        return [self.user[pick], self.assistant[pick]][:messages_left]


@dataclass
class Seeded:
    """What the seed wrote: the expected counters and how long it took."""

    messages: int
    token_total: int
    last_turn_id: str
    last_turn_messages: int
    seconds: float


def _rows(
    session_pk: int, count: int, templates: Templates, counter: TokenCounter, seed: int
) -> Iterator[tuple[dict[str, Any], str, int]]:
    """(row, turn_id, index) for seq 1..count, with running token totals."""
    rng = random.Random(seed)
    tokens_of: dict[int, int] = {}
    seq, total, turn = 0, 0, 0
    while seq < count:
        # Client-generated ids are random, so the unique (session, turn, idx) index is
        # filled in random order, as in production.
        turn_id = f"{rng.getrandbits(128):032x}"
        for index, message in enumerate(templates.turn(turn, count - seq)):
            tokens = tokens_of.get(id(message))
            if tokens is None:
                tokens = tokens_of[id(message)] = counter.count_message(message)
            seq, total = seq + 1, total + tokens
            row = stored_columns(
                session_pk,
                message,
                seq=seq,
                turn_id=turn_id,
                index=index,
                tokens=tokens,
                cumulative_tokens=total,
                created_at=_BASE_TIME + timedelta(seconds=seq),
            )
            yield row, turn_id, index
        turn += 1


async def seed_session(
    store: SqlStateStore,
    ref: SessionRef,
    count: int,
    counter: TokenCounter,
    *,
    seed: int = 11,
    progress: bool = False,
) -> Seeded:
    """Create ``ref`` through the API (system prompt, hint, summary) with a log of ``count``
    messages bulk-inserted as described in the module docstring."""
    started = time.perf_counter()
    async with store.transaction() as tx:
        info = await tx.sessions.ensure(ref)
        await tx.conversation.set_system_prompt(ref, SYSTEM_PROMPT)
        await tx.conversation.add_hint(ref, HINT)
    session_pk = await _session_pk(store, ref)
    assert info.message_count == 0, f"{ref} is not empty"
    templates = Templates.build()
    batch: list[dict[str, Any]] = []
    total, last_turn, last_turn_messages = 0, "", 0
    for row, turn_id, index in _rows(session_pk, count, templates, counter, seed):
        batch.append(row)
        total = row["cumulative_tokens"]
        last_turn, last_turn_messages = turn_id, index + 1
        if len(batch) == BATCH_ROWS:
            await _insert(store, batch)
            batch = []
            if progress and row["seq"] % 200_000 == 0:
                print(f"    seeded {row['seq']:,} messages", flush=True)
    if batch:
        await _insert(store, batch)
    async with store.engine.begin() as conn:
        await conn.execute(
            update(sessions)
            .where(sessions.c.id == session_pk)
            .values(last_seq=count, message_count=count, token_total=total)
        )
    # A running summary, as a long session would have; the window start stays at 1, so the
    # token window is found among the whole log (the hardest case for the boundary seek).
    async with store.transaction() as tx:
        await tx.conversation.set_summary(ref, _sentence(random.Random(3), 120), count // 2)
    return Seeded(count, total, last_turn, last_turn_messages, time.perf_counter() - started)


async def _session_pk(store: SqlStateStore, ref: SessionRef) -> int:
    async with store.engine.connect() as conn:
        found = await conn.scalar(
            text(
                "SELECT id FROM statecore_sessions"
                " WHERE namespace = :n AND agent_id = :a AND session_id = :s"
            ),
            {"n": ref.namespace, "a": ref.agent_id, "s": ref.session_id},
        )
    return int(found)


async def _insert(store: SqlStateStore, batch: list[dict[str, Any]]) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(insert(message_table), batch)


async def settle(store: SqlStateStore) -> None:
    """Leave the database as a running one would be after the load, so no maintenance lands
    in the measurements: PostgreSQL vacuumed and analyzed (what autovacuum does after a bulk
    load), SQLite's write-ahead log checkpointed into the database file."""
    if store.dialect == "postgresql":
        async with store.engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await auto.exec_driver_sql("VACUUM ANALYZE")
            return
    # The engine opens every SQLite transaction with BEGIN IMMEDIATE, and a checkpoint cannot
    # run inside one: use a plain connection while the store's pool sits idle.
    path = store.engine.url.database
    await asyncio.to_thread(_checkpoint, str(path))


def _checkpoint(path: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0, f"could not checkpoint {path}"


async def verify_session(store: StateStore, ref: SessionRef, seeded: Seeded) -> dict[str, Any]:
    """Check the seeded session through the public API; raises AssertionError if it is off."""
    async with store.transaction() as tx:
        info = await tx.sessions.get(ref)
        assert info is not None, f"{ref} is missing"
        last = await tx.conversation.messages(ref, from_seq=max(1, seeded.messages - 4))
        window = await tx.conversation.tail(ref, max_tokens=4096)
        turn = await tx.conversation.turn_messages(ref, seeded.last_turn_id)
        summary = await tx.conversation.summary(ref)
    checks = {
        "last_seq": info.last_seq == seeded.messages,
        "message_count": info.message_count == seeded.messages,
        "token_total": info.token_total == seeded.token_total,
        "messages_tail": bool(last)
        and last[-1].seq == seeded.messages
        and last[-1].cumulative_tokens == seeded.token_total,
        "tail_window": bool(window)
        and window[-1].seq == seeded.messages
        and sum(m.tokens for m in window) <= 4096
        and [m.seq for m in window] == list(range(window[0].seq, seeded.messages + 1)),
        "last_turn": [m.index for m in turn] == list(range(seeded.last_turn_messages)),
        "summary": summary is not None and summary.through_seq == seeded.messages // 2,
    }
    failed = [name for name, ok in checks.items() if not ok]
    assert not failed, f"seeded session {ref} is inconsistent: {failed}"
    return {"api_checks": sorted(checks), "tail_window_messages": len(window)}


async def verify_rows(store: SqlStateStore, ref: SessionRef, seeded: Seeded) -> dict[str, int]:
    """One full pass over the rows (run once, never timed): seq 1..N with no gap, and every
    running total equal to the previous one plus the message's own tokens."""
    pk = await _session_pk(store, ref)
    async with store.engine.connect() as conn:
        count, first, last, tokens = (
            await conn.execute(
                text(
                    "SELECT count(*), min(seq), max(seq), sum(tokens) "
                    "FROM statecore_messages WHERE session_pk = :pk"
                ),
                {"pk": pk},
            )
        ).one()
        broken = await conn.scalar(
            text(
                "SELECT count(*) FROM statecore_messages m LEFT JOIN statecore_messages p "
                "ON p.session_pk = m.session_pk AND p.seq = m.seq - 1 "
                "WHERE m.session_pk = :pk "
                "AND m.cumulative_tokens <> COALESCE(p.cumulative_tokens, 0) + m.tokens"
            ),
            {"pk": pk},
        )
    assert (count, first, last) == (seeded.messages, 1, seeded.messages), (count, first, last)
    assert tokens == seeded.token_total and broken == 0, (tokens, broken)
    return {"rows": int(count), "running_total_mismatches": int(broken)}
