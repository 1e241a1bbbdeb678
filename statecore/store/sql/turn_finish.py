"""PostgreSQL: a turn commit's last three writes in one statement.

Every commit ends with the turn's record (what makes it idempotent), the session's
latest-turn marker (a KV entry) and the turn's change-feed events
(``StoreTransaction.finish_turn``). Sent one by one they are three round trips to the
server, each with its wake-ups of the server's backend and of the worker's event loop; a
chat turn's commit was eleven. Here they are the data-modifying CTEs of one statement,
built from the same statements the three stores send on their own (``insert_statement``,
``upsert_statement``, ``feed_ctes``), so what they write is the same.

One statement reads one snapshot, so its parts cannot see each other's rows; they write to
three different tables and read none of what the others write. Each still sees what the
transaction's earlier statements wrote. The refusal of a second record for the turn (its
insert writes no row) is read from the result and raised as the record store raises it,
after the other two parts ran: the transaction then rolls back whole, as it must anyway.
A namespace's first events take the general path (``SqlEventStore.append_in_steps``), which
creates its numbering row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select

from statecore.core.change_events import NewEvent
from statecore.core.models import SessionRef, validate_identifier
from statecore.store.sql import direct
from statecore.store.sql.context import SqlContext
from statecore.store.sql.events import SqlEventStore, feed_ctes, feed_parameters
from statecore.store.sql.kv import SqlKVStore, upsert_statement
from statecore.store.sql.schema import turn_records
from statecore.store.sql.turn_records import SqlTurnRecordStore, conflict, insert_statement


@direct.prebuilt
def _statement(with_events: bool) -> Any:
    """The record's insert, the marker's upsert and (``with_events``) the feed's CTEs,
    returning whether the record was inserted and the events' first number."""
    record = insert_statement("postgresql").returning(turn_records.c.turn_id).cte("record")
    marker = upsert_statement("postgresql").cte("marker")
    inserted = select(func.count()).select_from(record).scalar_subquery()
    if not with_events:
        return select(inserted.label("records")).add_cte(marker)
    _, feed = feed_ctes()
    first = select(func.min(feed.c.seq)).scalar_subquery()
    return select(inserted.label("records"), first.label("first_seq")).add_cte(marker)


async def finish_turn(
    ctx: SqlContext,
    turns: SqlTurnRecordStore,
    kv: SqlKVStore,
    feed: SqlEventStore,
    ref: SessionRef,
    turn_id: str,
    record: Any,
    marker: tuple[str, str, Any],
    events: Sequence[NewEvent],
) -> None:
    """``StoreTransaction.finish_turn`` on PostgreSQL (see the module's doc)."""
    bucket, key, value = marker
    parameters = await turns.insert_parameters(ref, turn_id, record)
    parameters |= await kv.upsert_parameters(ref.kv_scope, bucket, key, value)
    if events:
        validate_identifier(ref.namespace, "namespace")
        parameters |= feed_parameters(ref.namespace, events, ctx.now)
    found = (await ctx.execute(_statement(bool(events)), parameters)).first()
    if not found.records:
        raise conflict(ref, turn_id)
    if events and found.first_seq is None:
        await feed.append_in_steps(ref.namespace, events)
