"""A session's header row: its shape, and the statements that read, lock and write it.

Every transaction of a turn reads the header (``select_session``, or the turn's first read
``select_session_for_turn`` that brings the turn's record and more along), locks it before
writing what the session owns, and writes its counters back (``update_session_statement``).
``SqlContext`` (``_context``) decides which statement to send and keeps what it learnt;
this module only builds them, each once (``prebuilt_statements.prebuilt``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    Select,
    Text,
    Update,
    bindparam,
    cast,
    exists,
    literal_column,
    select,
    update,
)

from statecore.core._models import SessionInfo, SessionRef
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql._schema import hints, messages, sessions, turn_records

#: The header's column names, as a header row holds them.
SESSION_COLUMNS = tuple(sessions.c.keys())


class SessionRow(SimpleNamespace):
    """A session's header row (the ``sessions`` columns as attributes), as this transaction
    last read or wrote it."""


def session_key() -> tuple[ColumnElement[bool], ...]:
    """The header row of the session whose key the bind parameters ``p_namespace``,
    ``p_agent_id`` and ``p_session_id`` give: every statement that finds one by its key."""
    c = sessions.c
    return (
        c.namespace == bindparam("p_namespace", type_=c.namespace.type),
        c.agent_id == bindparam("p_agent_id", type_=c.agent_id.type),
        c.session_id == bindparam("p_session_id", type_=c.session_id.type),
    )


def turn_params(ref: SessionRef, turn_id: str) -> dict[str, str]:
    """Bind parameters of a statement about turn ``turn_id`` of the session ``ref``."""
    return {
        "p_namespace": ref.namespace,
        "p_agent_id": ref.agent_id,
        "p_session_id": ref.session_id,
        "p_turn_id": turn_id,
    }


@prebuilt_statements.prebuilt
def select_session(lock: bool) -> Select[Any]:
    """A session's header row by its key (bind parameters ``p_namespace``, ``p_agent_id``,
    ``p_session_id``), built once: every transaction of a turn reads it."""
    statement = select(sessions).where(*session_key())
    # SQLite renders no FOR UPDATE; there BEGIN IMMEDIATE already holds the write lock.
    return statement.with_for_update() if lock else statement


#: Labels of what ``select_session_for_turn`` and ``lock_session_for_turn_statement`` read
#: beside the header's columns.
TURN_RECORD = "turn_record"
HAS_HINTS = "has_hints"
HAS_TURN_MESSAGES = "has_turn_messages"
SNAPSHOT_IS_CURRENT = "snapshot_is_current"
assert not {TURN_RECORD, HAS_HINTS, HAS_TURN_MESSAGES, SNAPSHOT_IS_CURRENT} & set(sessions.c.keys())


def turn_has_messages() -> Any:
    """Whether turn ``p_turn_id`` has a message in the session of the selected header."""
    s, m = sessions.c, messages.c
    given = m.turn_id == bindparam("p_turn_id", type_=m.turn_id.type)
    # The turn's first index, not EXISTS: its ORDER BY is the (session, turn, index) key's
    # order, so PostgreSQL seeks that key with or without statistics. As EXISTS, a table
    # never analyzed was read through the (session, cumulative tokens) index instead,
    # filtering every message of the session on every commit. Its own ``messages``, also
    # when the outer statement reads the table too.
    first = (
        select(m.idx)
        .where(m.session_pk == s.id, given)
        .order_by(m.idx)
        .limit(1)
        .correlate_except(messages)
        .scalar_subquery()
    )
    return first.is_not(None).label(HAS_TURN_MESSAGES)


@prebuilt_statements.prebuilt
def select_session_for_turn(turn_messages: bool) -> Select[Any]:
    """``select_session(False)`` with, beside the header's columns, the record of turn
    ``p_turn_id`` (NULL when it never committed) and whether the session has hints: what a
    turn reads first, in one statement. ``turn_messages`` (SQLite): and whether the turn
    has messages, which an append that follows then need not look up."""
    s, r, h = sessions.c, turn_records.c, hints.c
    extra = [turn_has_messages()] if turn_messages else []
    # A subquery on the record's whole primary key, which PostgreSQL looks up by that key
    # with or without statistics (as an outer join, a table never analyzed was scanned
    # whole: every session's records, on every turn).
    record = (
        select(r.record)
        .where(r.session_pk == s.id, r.turn_id == bindparam("p_turn_id", type_=r.turn_id.type))
        .scalar_subquery()
    )
    return select(
        sessions,
        record.label(TURN_RECORD),
        exists().where(h.session_pk == s.id).label(HAS_HINTS),
        *extra,
    ).where(*session_key())


#: The prefix of the message columns ``select_session_for_turn_with_window`` reads beside the
#: header's (whose names they share).
WINDOW_PREFIX = "window_"
WINDOW_COLUMNS = tuple(messages.c.keys())


@prebuilt_statements.prebuilt
def select_session_for_turn_with_window() -> Select[Any]:
    """``select_session_for_turn(False)`` (PostgreSQL, MariaDB) with, beside it, the
    session's non-retracted messages from seq ``p_window_from`` on when the header's primary
    key is ``p_window_pk``: one row per message, ascending (one row with NULL message
    columns when there is none, or the session is another header row now). A window cached
    by the process starts there."""
    s, m = sessions.c, messages.c
    window_pk = bindparam("p_window_pk", type_=s.id.type)
    # A derived table with its own ORDER BY, which PostgreSQL plans on its own (it does not
    # merge such a subquery into the join): the primary key's range from (session, seq) on,
    # as the window's own read, whatever statistics the tables have. Merged into the join,
    # PostgreSQL without statistics may take another index on the session and filter every
    # row of its log.
    rows = (
        select(*(m[name].label(WINDOW_PREFIX + name) for name in WINDOW_COLUMNS))
        .where(
            m.session_pk == window_pk,
            m.seq >= bindparam("p_window_from", type_=m.seq.type),
            m.retracted_at.is_(None),
        )
        .order_by(m.seq)
        .subquery("statecore_window_rows")
    )
    base = select_session_for_turn(False)
    return (
        base.add_columns(*rows.c)
        .select_from(base.get_final_froms()[0].outerjoin(rows, s.id == window_pk))
        .order_by(rows.c[WINDOW_PREFIX + "seq"])
    )


def window_rows(rows: Sequence[Any]) -> list[dict[str, Any]]:
    """The message rows of ``select_session_for_turn_with_window``'s result, as ``messages``
    rows (by their own column names)."""
    named = [(name, WINDOW_PREFIX + name) for name in WINDOW_COLUMNS]
    return [
        {name: columns[label] for name, label in named}
        for columns in (row._mapping for row in rows)
        if columns[WINDOW_PREFIX + "seq"] is not None
    ]


@prebuilt_statements.prebuilt
def lock_session_for_turn_statement(snapshot_check: bool) -> Select[Any]:
    """``select_session(True)`` with whether turn ``p_turn_id`` has messages beside the
    header's columns (``SqlContext.find_session_for_turn``). ``snapshot_check``
    (PostgreSQL): and whether the locked row is the version the statement's snapshot
    holds, by the row's ``xmin`` (the transaction that wrote the version), which only an
    UPDATE changes: a lock takes no new version."""
    s = sessions.c
    columns: list[Any] = [sessions, turn_has_messages()]
    if snapshot_check:
        as_of = sessions.alias("statecore_sessions_as_of_snapshot")
        snapshot_xmin = (
            select(literal_column(f"{as_of.name}.xmin")).where(as_of.c.id == s.id).scalar_subquery()
        )
        locked_xmin: ColumnElement[Any] = literal_column(f"{sessions.name}.xmin")
        columns.append((locked_xmin == snapshot_xmin).label(SNAPSHOT_IS_CURRENT))
    return select(*columns).where(*session_key()).with_for_update(of=sessions)


@prebuilt_statements.prebuilt
def update_session_statement(names: tuple[str, ...]) -> Update:
    """``UPDATE`` of the named header columns (bind parameters ``v_<name>``) of the header
    row whose primary key is ``p_id``: one statement per combination a store writes."""
    c = sessions.c
    values = {name: bindparam(f"v_{name}", type_=c[name].type) for name in names}
    return update(sessions).where(c.id == bindparam("p_id", type_=c.id.type)).values(values)


def window_base_query() -> Any:
    """The log's running token total before its first non-retracted message with
    ``seq >= p_window_from`` in the session whose header's primary key is ``p_id`` (NULL when
    there is none), as a scalar subquery."""
    m = messages.c
    return (
        select(m.cumulative_tokens - m.tokens)
        .where(
            # The header's own key, not a correlation: SQLite names RETURNING's columns
            # without their table.
            m.session_pk == bindparam("p_id", type_=sessions.c.id.type),
            m.seq >= bindparam("p_window_from", type_=m.seq.type),
            m.retracted_at.is_(None),
        )
        .order_by(m.seq)
        .limit(1)
        .scalar_subquery()
    )


def header_version() -> ColumnElement[str]:
    """PostgreSQL: the header row version's ``xmin`` (the transaction that wrote it), as
    text: every UPDATE of the row gives it a new one, a lock does not."""
    return cast(literal_column(f"{sessions.name}.xmin"), Text)


@prebuilt_statements.prebuilt
def update_session_returning_base(
    names: tuple[str, ...], along: Callable[[], CTE] | None, with_version: bool = False
) -> Update:
    """``update_session_statement`` (with the data-modifying CTE ``along()`` in front, if
    given) that returns ``window_base_query()`` as ``window_base``, read from the
    statement's snapshot (``SqlContext.append_to_log``), and with ``with_version``
    (PostgreSQL) the new row version's ``header_version()`` as ``xmin``."""
    statement = update_session_statement(names)
    if along is not None:
        statement = statement.add_cte(along())
    returned = [window_base_query().label("window_base")]
    if with_version:
        returned.append(header_version().label("xmin"))
    return statement.returning(*returned)


@prebuilt_statements.prebuilt
def lock_session_statement() -> Select[Any]:
    """``SELECT id ... FOR UPDATE`` of a session's header row (the bind parameters of
    ``select_session``): its row lock without its fields."""
    c = sessions.c
    return select(c.id).where(*session_key()).with_for_update()


def session_info(row: SessionRow, ref: SessionRef | None = None) -> SessionInfo:
    """A SessionInfo from a ``sessions`` row."""
    if ref is None:
        ref = SessionRef(namespace=row.namespace, agent_id=row.agent_id, session_id=row.session_id)
    return SessionInfo(
        ref=ref,
        system_prompt=row.system_prompt,
        last_seq=row.last_seq,
        message_count=row.message_count,
        token_total=row.token_total,
        window_start_seq=row.window_start_seq,
        created_at=row.created_at,
        last_accessed=row.last_accessed,
        ttl_seconds=row.ttl_seconds,
    )
