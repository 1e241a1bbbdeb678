"""PostgreSQL: a turn commit's last writes in one statement.

Every commit ends with the model's token usage added to the session's totals, the turn's
record (what makes it idempotent), the session's latest-turn marker (a KV entry) and the
turn's change-feed events (``StoreTransaction.finish_turn``). Sent one by one they are up
to four round trips to the server, each with its wake-ups of the server's backend and of
the worker's event loop; a chat turn's commit was eleven. Here they are the
data-modifying CTEs of one statement, built from the same statements the stores send on
their own (``add_usage_statement``, ``insert_statement``, ``upsert_statement``,
``feed_cte``), so what they write is the same.

One statement reads one snapshot, so its parts cannot see each other's rows; they write to
four different tables and read none of what the others write. Each still sees what the
transaction's earlier statements wrote. The refusal of a second record for the turn (its
insert writes no row) is read from the result and raised as the record store raises it,
after the other parts ran: the transaction then rolls back whole, as it must anyway. What
a part could not do in one statement follows it on the general path: a session's first
usage creates its orchestration row (``after_usage``), and a namespace's first events
create its numbering row (``SqlEventStore.append_in_steps``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import func, select

from statecore.core._change_events import NewEvent
from statecore.core._models import SessionRef, TokenUsage
from statecore.store.sql import _direct as direct
from statecore.store.sql import _one_statement_commit as one_statement_commit
from statecore.store.sql._context import SqlContext
from statecore.store.sql._events import feed_cte, feed_parameters
from statecore.store.sql._kv import upsert_statement
from statecore.store.sql._orchestration import add_usage_statement
from statecore.store.sql._schema import orchestration_states, turn_records
from statecore.store.sql._turn_records import conflict, insert_statement

if TYPE_CHECKING:
    from statecore.store.sql._events import SqlEventStore
    from statecore.store.sql._kv import SqlKVStore
    from statecore.store.sql._orchestration import SqlOrchestrationStore
    from statecore.store.sql._turn_records import SqlTurnRecordStore


class TurnStores(Protocol):
    """The parts of a SQL transaction a turn's end writes through (``SqlTransaction``)."""

    events: SqlEventStore
    kv: SqlKVStore
    turns: SqlTurnRecordStore
    orchestration: SqlOrchestrationStore


@direct.prebuilt
def _statement(with_usage: bool, with_events: bool) -> Any:
    """The record's insert and the marker's upsert, with (``with_usage``) the usage's
    addition and (``with_events``) the feed's CTEs; returning whether the record was
    inserted, whether the usage was added, and the events' first number."""
    record = insert_statement("postgresql").returning(turn_records.c.turn_id).cte("record")
    marker = upsert_statement("postgresql").cte("marker")
    columns = [select(func.count()).select_from(record).scalar_subquery().label("records")]
    if with_usage:
        usage = add_usage_statement().returning(orchestration_states.c.session_pk).cte("usage")
        columns.append(select(func.count()).select_from(usage).scalar_subquery().label("usage"))
    if with_events:
        first = select(func.min(feed_cte().c.seq)).scalar_subquery()
        columns.append(first.label("first_seq"))
    return select(*columns).add_cte(marker)


async def finish_turn(
    tx: TurnStores,
    ctx: SqlContext,
    ref: SessionRef,
    turn_id: str,
    record: Any,
    marker: tuple[str, str, Any],
    events: Sequence[NewEvent],
    usage: TokenUsage | None,
) -> None:
    """``StoreTransaction.finish_turn`` on PostgreSQL (see the module's doc)."""
    bucket, key, value = marker
    to_count = usage if usage is not None and usage.total_tokens else None
    parameters: dict[str, Any] = {}
    if to_count is not None:
        prompt, completion = to_count.prompt_tokens, to_count.completion_tokens
        parameters |= await tx.orchestration.usage_parameters(ref, prompt, completion)
    parameters |= await tx.turns.insert_parameters(ref, turn_id, record)
    parameters |= await tx.kv.upsert_parameters(ref.kv_scope, bucket, key, value)
    if events:  # the namespace is the ref's, checked with it above
        parameters |= feed_parameters(ref.namespace, events, ctx.now)
    deferred = ctx.deferred_turn(ref)
    if deferred is not None:
        # Held back since begin_turn: the whole commit goes as one statement, which
        # checks what the usual path's follow-ups below would have had to do.
        await one_statement_commit.send(
            ctx, deferred, parameters, to_count is not None, bool(events)
        )
        ctx.turn_finished(ref)
        return
    statement = _statement(to_count is not None, bool(events))
    found = (await ctx.execute(statement, parameters)).first()
    if not found.records:
        raise conflict(ref, turn_id)
    if to_count is not None:
        await tx.orchestration.after_usage(ref, prompt, completion, counted=bool(found.usage))
    if events and found.first_seq is None:
        await tx.events.append_in_steps(ref.namespace, events)
    ctx.turn_finished(ref)
