"""PostgreSQL: a chat turn's commit in one statement, one round trip.

A turn that appends messages and then writes only what ends every turn (the usage, the
turn's record, the latest-turn marker, the change-feed events) normally takes five round
trips on PostgreSQL: BEGIN, the header's locked read, the append (the messages ride in the
header's UPDATE), the last writes (``turn_finish``), COMMIT. Each is a wake-up of the server's
backend and of the worker's event loop; on a network they are the turn's largest cost.

When this process committed the session's previous turn, the header memo
(``header_memo``) already holds what the locked read would return. The commit then sends no
statement until its end, and there sends one: every write as a data-modifying CTE, outside
any server transaction, so it commits on its own. The statement first checks what the memo
promised, and fails whole unless all of it holds:

- the header row is still the version the memo names (its ``xmin``). The header's UPDATE
  says so: at READ COMMITTED an UPDATE that waited for a concurrent writer's row lock
  checks its condition again on the row's newest version. Every transaction that changes
  the log (appends, clears, restores, retractions), the window or the summary updates the
  header, so its version moving on is how they show;
- the log's running token total before the window's first message is still the memo's:
  the turn's record and result report the window's tokens from it;
- the turn's record was inserted (no other attempt of the turn committed one), the
  session's orchestration row took the usage, and the namespace's numbering row numbered
  the events (a session's first usage and a namespace's first events take the usual path,
  which creates those rows);
- the turn's messages were new (their (session, turn, index) key is unique).

A failed check fails the statement with an error, so nothing of it is written, and the
commit runs again the usual way (``RestartTransaction``). What the statement writes is what
the usual path writes: its parts are the same statements (``update_session_statement``,
the append's CTE, ``insert_statement``, ``upsert_statement``, ``add_usage_statement``,
``feed_cte``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Integer, and_, bindparam, case, cast, func, literal, select

from statecore.store.sql import _direct as direct
from statecore.store.sql._context import SqlContext
from statecore.store.sql._events import feed_cte
from statecore.store.sql._header_memo import DeferredTurn
from statecore.store.sql._kv import upsert_statement
from statecore.store.sql._orchestration import add_usage_statement
from statecore.store.sql._schema import orchestration_states, turn_records
from statecore.store.sql._session_header import (
    header_version,
    update_session_statement,
    window_base_query,
)
from statecore.store.sql._turn_records import insert_statement

#: What the statement's error says when a check fails (PostgreSQL reports it as an integer
#: that does not parse, with this text in it).
STALE = "statecore: the session changed since this process last committed a turn of it"


@direct.prebuilt
def _statement(names: tuple[str, ...], along: Any, with_usage: bool, with_events: bool) -> Any:
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


async def send(
    ctx: SqlContext,
    deferred: DeferredTurn,
    finish: dict[str, Any],
    with_usage: bool,
    with_events: bool,
) -> None:
    """Send ``deferred``'s commit with the last writes' bind parameters ``finish`` (as
    ``turn_finish`` makes them); RestartTransaction when it wrote nothing."""
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
    statement = _statement(tuple(sorted(deferred.header)), build, with_usage, with_events)
    await ctx.send_deferred(statement, parameters)
