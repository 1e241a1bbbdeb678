"""The message log of a session in SQL: appends that cost the same at any log length, and a
token window found with one indexed query."""

from __future__ import annotations

from bisect import bisect_left
from datetime import datetime
from typing import Any

from sqlalchemy import CTE, Insert, Select, bindparam, delete, func, insert, select, update
from sqlalchemy.dialects.postgresql import ARRAY

from statecore.core._errors import AlreadyExistsError
from statecore.core._models import Message as NewMessage
from statecore.core._models import SessionRef, StoredMessage
from statecore.store._conversation_contract import ConversationStore
from statecore.store._inputs import RestoreExtras
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql._context import SqlContext
from statecore.store.sql._conversation_extras import ConversationExtras
from statecore.store.sql._message_rows import stored_columns, stored_message
from statecore.store.sql._schema import hints as hint_table
from statecore.store.sql._schema import messages as message_table
from statecore.store.sql._session_expiry import expiry
from statecore.store.sql._session_header import SessionRow
from statecore.store.sql._window_cache import CachedWindow, WindowCache, same_row


class SqlConversationStore(ConversationExtras, ConversationStore):
    """Log operations here; system prompt, hints and summary in ConversationExtras."""

    def __init__(self, ctx: SqlContext) -> None:
        self._ctx = ctx

    async def _append(
        self, ref: SessionRef, turn_id: str, checked: list[NewMessage], start_index: int
    ) -> list[StoredMessage]:
        ctx = self._ctx
        # The session row lock serialises appends, so seq and the running totals are read
        # and advanced here without scanning the log.
        session = await ctx.session_row(ref, lock=True)
        if not checked:
            return []
        stop_index = start_index + len(checked) - 1
        already = {}
        if not ctx.turn_has_no_messages(session.id, turn_id):
            already = {
                row.idx: row
                for row in await ctx.execute(
                    _turn_indexes(),
                    {
                        "p_session_pk": session.id,
                        "p_turn_id": turn_id,
                        "p_first_index": start_index,
                        "p_last_index": stop_index,
                    },
                )
            }
        seq, total, new_rows = session.last_seq, session.token_total, []
        result: list[StoredMessage] = []
        for offset, message in enumerate(checked):
            index = start_index + offset
            if index in already:
                result.append(stored_message(already[index]))
                continue
            tokens = ctx.counter.count_message(message)
            seq, total = seq + 1, total + tokens
            columns = stored_columns(
                session.id,
                message,
                seq=seq,
                turn_id=turn_id,
                index=index,
                tokens=tokens,
                cumulative_tokens=total,
                created_at=ctx.now,
            )
            new_rows.append(columns)
            result.append(stored_message(columns))
        if not new_rows:
            return result
        ctx.messages_written(session.id, turn_id)
        counters = {
            "last_seq": seq,
            "message_count": session.message_count + len(new_rows),
            "token_total": total,
        }
        along = None
        if ctx.dialect == "postgresql":
            # The messages ride in the header's UPDATE: one round trip for both.
            arrays = {f"m_{name}": [row[name] for row in new_rows] for name in _APPENDED}
            along = (_appended_messages, arrays)
        else:
            await ctx.execute(_insert_messages(), new_rows)
        await ctx.append_to_log(session, new_rows, along, **counters)
        return result

    async def _turn_messages(self, ref: SessionRef, turn_id: str) -> list[StoredMessage]:
        session = await self._ctx.session_row(ref)
        rows = await self._ctx.conn.execute(
            select(message_table)
            .where(message_table.c.session_pk == session.id, message_table.c.turn_id == turn_id)
            .order_by(message_table.c.idx)
        )
        return [stored_message(row) for row in rows]

    async def _messages(
        self,
        ref: SessionRef,
        from_seq: int | None,
        to_seq: int | None,
        limit: int | None,
        include_retracted: bool,
    ) -> list[StoredMessage]:
        session = await self._ctx.session_row(ref)
        statement = _message_range(
            include_retracted, from_seq is not None, to_seq is not None, limit is not None
        )
        params = {"p_session_pk": session.id, "p_from": from_seq, "p_to": to_seq, "p_limit": limit}
        return [stored_message(row) for row in await self._ctx.execute(statement, params)]

    async def _tokens_before(self, ref: SessionRef, seq: int) -> int | None:
        session = self._ctx.cached_session_row(ref)
        if session is not None:
            # An append in this transaction may have read it already (append_to_log).
            known, base = self._ctx.window_base(session.id, seq)
            if known:
                return base
        return await super()._tokens_before(ref, seq)

    async def _tail(
        self, ref: SessionRef, max_tokens: int | None, max_messages: int | None
    ) -> list[StoredMessage]:
        session = await self._ctx.session_row(ref)
        if session.last_seq == 0:
            return []
        first_seq = session.window_start_seq
        if max_tokens is not None and session.token_total > max_tokens:
            # Message m fits when the tokens from m to the end, token_total minus the running
            # total before m, are within budget: the running total before m must reach
            # token_total - max_tokens. The first message whose running total reaches that
            # threshold is the last one left out: a seek on (session_pk, cumulative_tokens).
            # It is read on its own so the window query below has one plain lower bound on
            # seq. As a subquery beside ``seq >= first_seq`` it cost a scan of the log:
            # SQLite seeked to first_seq and filtered every later row, and PostgreSQL,
            # unable to see the bound, planned for a third of the table (and JIT-compiled).
            threshold = session.token_total - max_tokens
            boundary = (
                await self._ctx.execute(
                    _window_boundary(), {"p_session_pk": session.id, "p_threshold": threshold}
                )
            ).scalar()
            if boundary is None:  # counters ahead of the rows: no message fits the budget
                return []
            first_seq = max(first_seq, boundary + 1)
        if max_messages is None:
            if max_tokens is not None and self._ctx.windows is not None:
                return await self._cached_window(session, first_seq, self._ctx.windows)
            return await self._window_from(session, first_seq)
        c = message_table.c
        # Newest first with a limit, so retracted rows never take a place in the count.
        newest = (
            select(message_table)
            .where(c.session_pk == session.id, c.seq >= first_seq, c.retracted_at.is_(None))
            .order_by(c.seq.desc())
            .limit(max_messages)
        )
        return [stored_message(row) for row in reversed(list(await self._ctx.conn.execute(newest)))]

    async def _window_from(self, session: SessionRow, first_seq: int) -> list[StoredMessage]:
        rows = await self._ctx.execute(
            _window(), {"p_session_pk": session.id, "p_first_seq": first_seq}
        )
        return [stored_message(row) for row in rows]

    async def _cached_window(
        self, session: SessionRow, first_seq: int, cache: WindowCache
    ) -> list[StoredMessage]:
        """The window from ``first_seq``, reading only the rows after the cached window's
        newest message when that message proves the cached rows current (window_cache)."""
        key = (session.namespace, session.agent_id, session.session_id)
        cached = cache.get(session.id)
        if cached is not None and cached.first_seq <= first_seq <= session.last_seq + 1:
            anchor = cached.anchor
            # The turn's first read may have brought these rows along (read_for_turn).
            rows = self._ctx.prefetched_window(session.id, anchor.seq)
            if rows is None:
                rows = [
                    row._mapping
                    for row in await self._ctx.execute(
                        _window(), {"p_session_pk": session.id, "p_first_seq": anchor.seq}
                    )
                ]
            if rows and same_row(anchor, rows[0]):
                kept = cached.messages[bisect_left(cached.messages, first_seq, key=_seq) :]
                window = (*kept, *(stored_message(row) for row in rows[1:]))
                cache.put(session.id, CachedWindow(first_seq, window), key)
                return list(window)
        found = await self._window_from(session, first_seq)
        cache.put(session.id, CachedWindow(first_seq, tuple(found)), key)
        return found

    async def _retract_last(self, ref: SessionRef) -> StoredMessage | None:
        session = await self._ctx.session_row(ref, lock=True)
        c = message_table.c
        newest = (
            await self._ctx.conn.execute(
                select(message_table)
                .where(c.session_pk == session.id, c.retracted_at.is_(None))
                .order_by(c.seq.desc())
                .limit(1)
            )
        ).first()
        if newest is None:
            return None
        self._ctx.forget_window(session.id)  # the window's first message may be this one
        now = self._ctx.now
        await self._ctx.conn.execute(
            update(message_table)
            .where(c.session_pk == session.id, c.seq == newest.seq)
            .values(retracted_at=now)
        )
        # The header moves on too (a retraction is an access), so a commit that knew the
        # header's version before sees that the log changed (_turn_commit).
        await self._ctx.update_session(
            session, last_accessed=now, expires_at=expiry(now, session.ttl_seconds)
        )
        return stored_message(newest)

    async def _retracted(self, ref: SessionRef) -> dict[int, datetime]:
        session = await self._ctx.session_row(ref)
        c = message_table.c
        rows = await self._ctx.conn.execute(
            select(c.seq, c.retracted_at)
            .where(c.session_pk == session.id, c.retracted_at.is_not(None))
            .order_by(c.seq)
        )
        return {row.seq: row.retracted_at for row in rows}

    async def _clear(self, ref: SessionRef) -> int:
        conn = self._ctx.conn
        session = await self._ctx.session_row(ref, lock=True)
        removed = await conn.execute(
            delete(message_table).where(message_table.c.session_pk == session.id)
        )
        await conn.execute(delete(hint_table).where(hint_table.c.session_pk == session.id))
        await self._ctx.update_session(session, **_EMPTY_LOG)
        return removed.rowcount

    async def _restore(
        self,
        ref: SessionRef,
        log: list[StoredMessage],
        extras: RestoreExtras,
        window_start_seq: int,
    ) -> None:
        last_seq = log[-1].seq if log else 0
        session = await self._ctx.session_row(ref, lock=True)
        if session.message_count:
            raise AlreadyExistsError(
                f"session {ref} already has {session.message_count} messages; restore needs "
                "an empty log (clear it or import into a new session)"
            )
        await self._write_log(session, log)
        await self._write_restored_extras(session, extras)
        await self._ctx.update_session(
            session,
            last_seq=last_seq,
            message_count=len(log),
            token_total=log[-1].cumulative_tokens if log else 0,
            window_start_seq=window_start_seq,
        )

    async def _write_log(self, session: SessionRow, log: list[StoredMessage]) -> None:
        if not log:
            return
        rows = [
            stored_columns(
                session.id,
                m,
                seq=m.seq,
                turn_id=m.turn_id,
                index=m.index,
                tokens=m.tokens,
                cumulative_tokens=m.cumulative_tokens,
                created_at=m.created_at,
            )
            for m in log
        ]
        await self._ctx.conn.execute(insert(message_table), rows)


# The two statements of ``tail``, built once with bind parameters: every turn runs them.
@prebuilt_statements.prebuilt
def _message_range(
    include_retracted: bool, from_seq: bool, to_seq: bool, limit: bool
) -> Select[Any]:
    """``messages()`` for one combination of its optional bounds, built once: each commit
    reads the window's first message through it."""
    c = message_table.c
    statement = select(message_table).where(
        c.session_pk == bindparam("p_session_pk", type_=c.session_pk.type)
    )
    if not include_retracted:
        statement = statement.where(c.retracted_at.is_(None))
    if from_seq:
        statement = statement.where(c.seq >= bindparam("p_from", type_=c.seq.type))
    if to_seq:
        statement = statement.where(c.seq <= bindparam("p_to", type_=c.seq.type))
    statement = statement.order_by(c.seq)
    if limit:
        statement = statement.limit(bindparam("p_limit", type_=c.seq.type))
    return statement


@prebuilt_statements.prebuilt
def _window_boundary() -> Select[Any]:
    c = message_table.c
    return (
        select(c.seq)
        .where(
            c.session_pk == bindparam("p_session_pk", type_=c.session_pk.type),
            c.cumulative_tokens >= bindparam("p_threshold", type_=c.cumulative_tokens.type),
        )
        .order_by(c.cumulative_tokens)
        .limit(1)
    )


@prebuilt_statements.prebuilt
def _turn_indexes() -> Select[Any]:
    """A turn's stored messages in an index range: every commit looks them up before its
    insert, so a retried append stores nothing twice."""
    c = message_table.c
    # Ordered as the (session, turn, index) key, so PostgreSQL seeks that key also in a
    # table never analyzed (unordered, it may take the (session, cumulative tokens) index
    # and filter every message of the session).
    return (
        select(message_table)
        .where(
            c.session_pk == bindparam("p_session_pk", type_=c.session_pk.type),
            c.turn_id == bindparam("p_turn_id", type_=c.turn_id.type),
            c.idx.between(
                bindparam("p_first_index", type_=c.idx.type),
                bindparam("p_last_index", type_=c.idx.type),
            ),
        )
        .order_by(c.idx)
    )


@prebuilt_statements.prebuilt
def _insert_messages() -> Insert:
    """``INSERT`` of new messages, one row per parameter set: each commit's append."""
    return insert(message_table)


#: The columns an append writes (the rest keep their defaults).
_APPENDED = (
    "session_pk",
    "seq",
    "turn_id",
    "idx",
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "metadata_json",
    "tokens",
    "cumulative_tokens",
    "created_at",
)


@prebuilt_statements.prebuilt
def _appended_messages() -> CTE:
    """PostgreSQL: an append's new messages as one ``INSERT ... SELECT FROM unnest(...)``
    CTE, each column an array (bind parameters ``m_<column>``), for the header's UPDATE to
    carry (``SqlContext.append_to_log``'s ``along``)."""
    c = message_table.c
    given = func.unnest(*(bindparam(f"m_{name}", type_=ARRAY(c[name].type)) for name in _APPENDED))
    rows = given.table_valued(*_APPENDED).render_derived(name="appended_rows")
    columns = select(*(rows.c[name] for name in _APPENDED))
    return insert(message_table).from_select(list(_APPENDED), columns).cte("appended")


@prebuilt_statements.prebuilt
def _window() -> Select[Any]:
    """Every non-retracted message of a session from a seq on."""
    c = message_table.c
    return (
        select(message_table)
        .where(
            c.session_pk == bindparam("p_session_pk", type_=c.session_pk.type),
            c.seq >= bindparam("p_first_seq", type_=c.seq.type),
            c.retracted_at.is_(None),
        )
        .order_by(c.seq)
    )


def _seq(message: StoredMessage) -> int:
    return message.seq


_EMPTY_LOG = {
    "system_prompt": None,
    "last_seq": 0,
    "message_count": 0,
    "token_total": 0,
    "window_start_seq": 1,
    "summary_text": None,
    "summary_through_seq": None,
    "summary_tokens": None,
    "summary_created_at": None,
}
