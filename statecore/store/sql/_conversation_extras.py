"""The parts of a conversation around the log: system prompt, hints, summary, window start."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, bindparam, delete, insert, select

from statecore.core._errors import InvalidLimitError
from statecore.core._models import Hint, SessionRef, Summary
from statecore.store._inputs import RestoreExtras, check_aware
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql._context import SqlContext
from statecore.store.sql._schema import hints as hint_table
from statecore.store.sql._session_header import SessionRow


def _summary_of(row: SessionRow) -> Summary | None:
    if row.summary_text is None:
        return None
    return Summary(
        text=row.summary_text,
        through_seq=row.summary_through_seq,
        tokens=row.summary_tokens,
        created_at=row.summary_created_at,
    )


def _summary_columns(summary: Summary | None) -> dict[str, Any]:
    return {
        "summary_text": summary.text if summary else None,
        "summary_through_seq": summary.through_seq if summary else None,
        "summary_tokens": summary.tokens if summary else None,
        "summary_created_at": summary.created_at if summary else None,
    }


class ConversationExtras:
    """Mixed into SqlConversationStore."""

    _ctx: SqlContext

    async def _set_system_prompt(self, ref: SessionRef, text: str | None) -> None:
        session = await self._ctx.session_row(ref, lock=True)
        await self._ctx.update_session(session, system_prompt=text)

    async def _add_hint(self, ref: SessionRef, text: str) -> Hint:
        session = await self._ctx.session_row(ref)
        now = self._ctx.now
        self._ctx.hints_added(session.id)
        result = await self._ctx.conn.execute(
            insert(hint_table).values(session_pk=session.id, text=text, created_at=now)
        )
        key = result.inserted_primary_key
        if key is None:
            # SQLAlchemy reports a key for every single-row INSERT; None would be its bug.
            raise RuntimeError("the database did not report the new hint's id")
        return Hint(id=key[0], text=text, created_at=now)

    async def _hints(self, ref: SessionRef) -> list[Hint]:
        session = await self._ctx.session_row(ref)
        if self._ctx.has_no_hints(session.id):
            return []  # the turn's first read saw none
        rows = await self._ctx.execute(_hints(), {"p_session_pk": session.id})
        return [Hint(id=r.id, text=r.text, created_at=r.created_at) for r in rows]

    async def _remove_hint(self, ref: SessionRef, hint_id: int) -> bool:
        session = await self._ctx.session_row(ref)
        removed = await self._ctx.conn.execute(
            delete(hint_table).where(
                hint_table.c.id == hint_id, hint_table.c.session_pk == session.id
            )
        )
        return removed.rowcount > 0

    async def _summary(self, ref: SessionRef) -> Summary | None:
        return _summary_of(await self._ctx.session_row(ref))

    async def _set_summary(self, ref: SessionRef, text: str, through_seq: int) -> Summary:
        session = await self._ctx.session_row(ref, lock=True)
        if through_seq > session.last_seq:
            raise InvalidLimitError(
                f"through_seq {through_seq} is past the last message (seq {session.last_seq})"
            )
        summary = Summary(
            text=text,
            through_seq=through_seq,
            tokens=self._ctx.counter.count_text(text),
            created_at=self._ctx.now,
        )
        await self._ctx.update_session(session, **_summary_columns(summary))
        return summary

    async def _set_window_start(self, ref: SessionRef, seq: int) -> None:
        session = await self._ctx.session_row(ref, lock=True)
        if not session.window_start_seq <= seq <= session.last_seq + 1:
            raise InvalidLimitError(
                f"window start {seq} must be between the current start "
                f"{session.window_start_seq} and last_seq + 1 ({session.last_seq + 1}); it only "
                "moves forward",
                seq=seq,
            )
        await self._ctx.update_session(session, window_start_seq=seq)

    async def _write_restored_extras(self, session: SessionRow, extras: RestoreExtras) -> None:
        if extras.hints:
            self._ctx.hints_added(session.id)
            # Hint ids are the store's own (autoincrement); text and time are kept.
            await self._ctx.conn.execute(
                insert(hint_table),
                [
                    {
                        "session_pk": session.id,
                        "text": h.text,
                        "created_at": check_aware(h.created_at),
                    }
                    for h in extras.hints
                ],
            )
        await self._ctx.update_session(
            session, system_prompt=extras.system_prompt, **_summary_columns(extras.summary)
        )


@prebuilt_statements.prebuilt
def _hints() -> Select[Any]:
    """A session's hints in order, built once: every turn's context read lists them."""
    c = hint_table.c
    return (
        select(c.id, c.text, c.created_at)
        .where(c.session_pk == bindparam("p_session_pk", type_=c.session_pk.type))
        .order_by(c.id)
    )
