"""A session's orchestration state in SQL.

Writes lock the session row first, so read-modify-write changes (advance the sequence, add
token usage) never lose an update, and each one restarts the session's idle clock:
orchestration activity is session activity."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Select, Update, bindparam, delete, insert, select, update

from statecore.core._models import (
    OrchestrationState,
    OrchestrationUpdate,
    SessionRef,
    TokenUsage,
    validate_identifier,
)
from statecore.store._base import OrchestrationStore
from statecore.store._inputs import (
    check_int,
    check_ref,
    check_token_usage,
    checked_orchestration_update,
    recent_tools,
    revalidate,
)
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql._context import SqlContext
from statecore.store.sql._schema import orchestration_states
from statecore.store.sql._session_expiry import expiry
from statecore.store.sql._session_header import SessionRow

c = orchestration_states.c
_DEFAULTS: dict[str, Any] = {
    "active_step": None,
    "recently_used_tools": (),
    "sequence_index": 0,
    "prompt_tokens": 0,
    "completion_tokens": 0,
}


def _fields(row: Row[Any] | None) -> dict[str, Any]:
    if row is None:
        return dict(_DEFAULTS)
    return {
        "active_step": row.active_step,
        "recently_used_tools": tuple(json.loads(row.recently_used_tools)),
        "sequence_index": row.sequence_index,
        "prompt_tokens": row.prompt_tokens,
        "completion_tokens": row.completion_tokens,
    }


def _columns(fields: dict[str, Any]) -> dict[str, Any]:
    return {**fields, "recently_used_tools": json.dumps(list(fields["recently_used_tools"]))}


def _out(fields: dict[str, Any], last_accessed: datetime, ttl_seconds: int) -> OrchestrationState:
    return OrchestrationState(
        active_step=fields["active_step"],
        recently_used_tools=list(fields["recently_used_tools"]),
        sequence_index=fields["sequence_index"],
        cumulative_token_usage=TokenUsage(
            prompt_tokens=fields["prompt_tokens"], completion_tokens=fields["completion_tokens"]
        ),
        last_accessed=last_accessed,
        ttl_seconds=ttl_seconds,
    )


class SqlOrchestrationStore(OrchestrationStore):
    def __init__(self, ctx: SqlContext) -> None:
        self._ctx = ctx

    async def _current(self, session_pk: int) -> Row[Any] | None:
        return (await self._ctx.execute(_current_row(), {"p_session_pk": session_pk})).first()

    async def _locked(self, ref: SessionRef) -> tuple[SessionRow, Row[Any] | None]:
        session = await self._ctx.session_row(ref, lock=True)
        return session, await self._current(session.id)

    async def _write(
        self,
        session: SessionRow,
        existing: Row[Any] | None,
        fields: dict[str, Any],
        ttl_seconds: int | None = None,
        *,
        touch: bool = True,
    ) -> OrchestrationState:
        conn = self._ctx.conn
        if existing is None:
            await conn.execute(
                insert(orchestration_states).values(session_pk=session.id, **_columns(fields))
            )
        else:
            await conn.execute(
                update(orchestration_states)
                .where(c.session_pk == session.id)
                .values(**_columns(fields))
            )
        if not touch:
            return _out(fields, session.last_accessed, session.ttl_seconds)
        await self._touch(session, ttl_seconds)
        return _out(fields, session.last_accessed, session.ttl_seconds)

    async def _touch(self, session: SessionRow, ttl_seconds: int | None = None) -> None:
        now = self._ctx.now
        ttl = ttl_seconds if ttl_seconds is not None else session.ttl_seconds
        # A turn's commit ensured (and so touched) the session already in this transaction.
        if (session.last_accessed, session.ttl_seconds) != (now, ttl):
            await self._ctx.update_session(
                session, last_accessed=now, ttl_seconds=ttl, expires_at=expiry(now, ttl)
            )

    async def get(self, ref: SessionRef) -> OrchestrationState | None:
        check_ref(ref)
        session = await self._ctx.session_row(ref)
        row = await self._current(session.id)
        return (
            None if row is None else _out(_fields(row), session.last_accessed, session.ttl_seconds)
        )

    async def get_or_create(self, ref: SessionRef) -> OrchestrationState:
        check_ref(ref)
        session, row = await self._locked(ref)
        if row is not None:
            return _out(_fields(row), session.last_accessed, session.ttl_seconds)
        return await self._write(session, None, dict(_DEFAULTS))

    async def update(self, ref: SessionRef, update: OrchestrationUpdate) -> OrchestrationState:
        check_ref(ref)
        changes, ttl = checked_orchestration_update(update)
        session, row = await self._locked(ref)
        return await self._write(session, row, {**_fields(row), **changes}, ttl)

    async def set_active_step(self, ref: SessionRef, step: str | None) -> OrchestrationState:
        check_ref(ref)
        if step is not None:
            validate_identifier(step, "step")
        session, row = await self._locked(ref)
        return await self._write(session, row, {**_fields(row), "active_step": step})

    async def add_used_tool(self, ref: SessionRef, tool: str) -> OrchestrationState:
        check_ref(ref)
        validate_identifier(tool, "tool")
        session, row = await self._locked(ref)
        fields = _fields(row)
        fields["recently_used_tools"] = recent_tools([*fields["recently_used_tools"], tool])
        return await self._write(session, row, fields)

    async def advance_sequence(self, ref: SessionRef) -> OrchestrationState:
        check_ref(ref)
        session, row = await self._locked(ref)
        fields = _fields(row)
        fields["sequence_index"] += 1
        return await self._write(session, row, fields)

    async def add_token_usage(
        self, ref: SessionRef, prompt_tokens: int, completion_tokens: int
    ) -> OrchestrationState:
        check_token_usage(ref, prompt_tokens, completion_tokens)
        session, row = await self._locked(ref)
        fields = _fields(row)
        fields["prompt_tokens"] += prompt_tokens
        fields["completion_tokens"] += completion_tokens
        return await self._write(session, row, fields)

    async def count_token_usage(
        self, ref: SessionRef, prompt_tokens: int, completion_tokens: int
    ) -> None:
        params = await self.usage_parameters(ref, prompt_tokens, completion_tokens)
        added = await self._ctx.execute(add_usage_statement(), params)
        await self.after_usage(ref, prompt_tokens, completion_tokens, counted=added.rowcount == 1)

    async def usage_parameters(
        self, ref: SessionRef, prompt_tokens: int, completion_tokens: int
    ) -> dict[str, Any]:
        """The bind parameters of ``add_usage_statement`` for ``count_token_usage``, checked
        as it checks them, with the session's header locked as it locks it. For a statement
        that carries the addition beside other writes; ``after_usage`` follows it."""
        check_token_usage(ref, prompt_tokens, completion_tokens)
        session = await self._ctx.session_row(ref, lock=True)
        return {
            "p_session_pk": session.id,
            "p_prompt": prompt_tokens,
            "p_completion": completion_tokens,
        }

    async def after_usage(
        self, ref: SessionRef, prompt_tokens: int, completion_tokens: int, *, counted: bool
    ) -> None:
        """What ``count_token_usage`` does after its UPDATE: a session without an
        orchestration row (the UPDATE ``counted`` nothing) gets one the usual way, and
        otherwise the session's idle clock moves."""
        if not counted:
            await self.add_token_usage(ref, prompt_tokens, completion_tokens)
            return
        await self._touch(await self._ctx.session_row(ref, lock=True))

    async def reset(self, ref: SessionRef) -> bool:
        check_ref(ref)
        session = await self._ctx.session_row(ref, lock=True)
        removed = await self._ctx.conn.execute(
            delete(orchestration_states).where(c.session_pk == session.id)
        )
        return removed.rowcount > 0

    async def restore(self, ref: SessionRef, state: OrchestrationState) -> None:
        """Write the orchestration fields verbatim; the session keeps its own idle clock."""
        check_ref(ref)
        state = revalidate(OrchestrationState, state, "orchestration state")
        fields = {
            "active_step": (
                None
                if state.active_step is None
                else validate_identifier(state.active_step, "active_step")
            ),
            "recently_used_tools": recent_tools(state.recently_used_tools),
            "sequence_index": check_int(state.sequence_index, "sequence_index"),
            "prompt_tokens": check_int(state.cumulative_token_usage.prompt_tokens, "prompt_tokens"),
            "completion_tokens": check_int(
                state.cumulative_token_usage.completion_tokens, "completion_tokens"
            ),
        }
        session, row = await self._locked(ref)
        await self._write(session, row, fields, touch=False)


@prebuilt_statements.prebuilt
def add_usage_statement() -> Update:
    """Add a call's tokens to a session's totals in place (a turn's commit, built once),
    with the bind parameters of ``SqlOrchestrationStore.usage_parameters``."""
    return (
        update(orchestration_states)
        .where(c.session_pk == bindparam("p_session_pk", type_=c.session_pk.type))
        .values(
            prompt_tokens=c.prompt_tokens + bindparam("p_prompt", type_=c.prompt_tokens.type),
            completion_tokens=c.completion_tokens
            + bindparam("p_completion", type_=c.completion_tokens.type),
        )
    )


@prebuilt_statements.prebuilt
def _current_row() -> Select[Any]:
    """A session's orchestration row, built once: every turn's commit reads it."""
    return select(orchestration_states).where(
        c.session_pk == bindparam("p_session_pk", type_=c.session_pk.type)
    )
