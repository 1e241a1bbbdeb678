"""PostgreSQL: a turn's commit, in as few statements as it can be.

**The last writes in one statement.** Every commit ends with the model's token usage added to
the session's totals, the turn's record (what makes it idempotent), the session's latest-turn
marker (a KV entry) and the turn's change-feed events (``StoreTransaction.finish_turn``).
Sent one by one they are up to four round trips to the server, each with its wake-ups of the
server's backend and of the worker's event loop; a chat turn's commit was eleven. Here they
are the data-modifying CTEs of one statement, built from the same statements the stores send
on their own (``add_usage_statement``, ``insert_statement``, ``upsert_statement``,
``feed_cte``), so what they write is the same.

One statement reads one snapshot, so its parts cannot see each other's rows; they write to
four different tables and read none of what the others write. Each still sees what the
transaction's earlier statements wrote. The refusal of a second record for the turn (its
insert writes no row) is read from the result and raised as the record store raises it,
after the other parts ran: the transaction then rolls back whole, as it must anyway. What a
part could not do in one statement follows it on the general path: a session's first usage
creates its orchestration row (``after_usage``), and a namespace's first events create its
numbering row (``SqlEventStore.append_in_steps``).

**The whole commit in one statement.** A turn that appends messages and then writes only
what ends every turn normally takes five round trips on PostgreSQL: BEGIN, the header's locked
read, the append (the messages ride in the header's UPDATE), the last writes above, COMMIT.
When this process committed the session's previous turn, the header memo (``_header_memo``)
already holds what the locked read would return; ``SqlContext.defer_turn`` then holds every
write back, and here they go as one statement, outside any server transaction, so it commits
on its own. The statement first checks what the memo promised, and fails whole unless all of
it holds:

- the header row is still the version the memo names (its ``xmin``). The header's UPDATE
  says so: at READ COMMITTED an UPDATE that waited for a concurrent writer's row lock checks
  its condition again on the row's newest version. Every transaction that changes the log
  (appends, clears, restores, retractions), the window or the summary updates the header,
  so its version moving on is how they show;
- the log's running token total before the window's first message is still the memo's: the
  turn's record and result report the window's tokens from it;
- the turn's record was inserted (no other attempt of the turn committed one), the session's
  orchestration row took the usage, and the namespace's numbering row numbered the events
  (a session's first usage and a namespace's first events take the usual path, which
  creates those rows);
- the turn's messages were new (their (session, turn, index) key is unique).

A failed check fails the statement with an error, so nothing of it is written, and the commit
runs again the usual way (``RestartTransaction``). What the statement writes is what the
usual path writes: its parts are the same statements (``update_session_statement``, the
append's CTE, and the last writes' statements above).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import BigInteger, Integer, and_, bindparam, case, cast, func, literal, select

from statecore.core._change_events import NewEvent
from statecore.core._models import SessionRef, TokenUsage
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql._context import SqlContext
from statecore.store.sql._events import feed_cte, feed_parameters
from statecore.store.sql._header_memo import DeferredTurn
from statecore.store.sql._kv import upsert_statement
from statecore.store.sql._orchestration import add_usage_statement
from statecore.store.sql._schema import orchestration_states, turn_records
from statecore.store.sql._session_header import (
    header_version,
    update_session_statement,
    window_base_query,
)
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


@prebuilt_statements.prebuilt
def _last_writes(with_usage: bool, with_events: bool) -> Any:
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
        await _send_whole_commit(ctx, deferred, parameters, to_count is not None, bool(events))
        ctx.turn_finished(ref)
        return
    statement = _last_writes(to_count is not None, bool(events))
    found = (await ctx.execute(statement, parameters)).first()
    if not found.records:
        raise conflict(ref, turn_id)
    if to_count is not None:
        await tx.orchestration.after_usage(ref, prompt, completion, counted=bool(found.usage))
    if events and found.first_seq is None:
        await tx.events.append_in_steps(ref.namespace, events)
    ctx.turn_finished(ref)


#: What the statement's error says when a check fails (PostgreSQL reports it as an integer
#: that does not parse, with this text in it).
STALE = "statecore: the session changed since this process last committed a turn of it"


@prebuilt_statements.prebuilt
def _whole_commit(names: tuple[str, ...], along: Any, with_usage: bool, with_events: bool) -> Any:
    """The commit as one statement: the header's UPDATE of ``names`` where its version is
    ``p_xmin``, with the append's CTE ``along()``, the record, the marker, the usage
    (``with_usage``) and the events (``with_events``); selecting the checks (an integer cast
    that fails when one does not hold) and the header's new version."""
    version = header_version()
    header = (
        update_session_statement(names)
        .where(version == bindparam("p_xmin", type_=version.type))
        .returning(version.label("xmin"))
        .cte("header")
    )
    record = insert_statement("postgresql").returning(turn_records.c.turn_id).cte("record")
    marker = upsert_statement("postgresql").cte("marker")
    # The header first: the checks are read in order, so its row lock comes before the
    # other rows', as on the usual path.
    checks = [
        select(func.count()).select_from(header).scalar_subquery() == 1,
        window_base_query().is_not_distinct_from(bindparam("p_window_base", type_=BigInteger)),
        select(func.count()).select_from(record).scalar_subquery() == 1,
    ]
    if with_usage:
        usage = add_usage_statement().returning(orchestration_states.c.session_pk).cte("usage")
        checks.append(select(func.count()).select_from(usage).scalar_subquery() == 1)
    if with_events:
        checks.append(select(func.min(feed_cte().c.seq)).scalar_subquery().is_not(None))
    fits = cast(case((and_(*checks), literal("1")), else_=literal(STALE)), Integer)
    new_version = select(header.c.xmin).scalar_subquery()
    return select(fits.label("fits"), new_version.label("xmin")).add_cte(along(), marker)


async def _send_whole_commit(
    ctx: SqlContext,
    deferred: DeferredTurn,
    finish: dict[str, Any],
    with_usage: bool,
    with_events: bool,
) -> None:
    """Send ``deferred``'s commit with the last writes' bind parameters ``finish`` (as
    ``finish_turn`` makes them); RestartTransaction when it wrote nothing."""
    assert deferred.header is not None and deferred.along is not None
    build, appended = deferred.along
    memo = deferred.memo
    parameters = {
        **finish,
        **appended,
        **{f"v_{name}": value for name, value in deferred.header.items()},
        "p_id": deferred.pk,
        "p_xmin": memo.xmin,
        "p_window_from": memo.window_start,
        "p_window_base": memo.window_base,
    }
    statement = _whole_commit(tuple(sorted(deferred.header)), build, with_usage, with_events)
    await ctx.send_deferred(statement, parameters)
