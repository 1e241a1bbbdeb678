"""Flow checkpoints in SQL, every version kept (time travel and fork)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, func, insert, select, tuple_
from sqlalchemy.engine import RowMapping

from statecore.core._errors import AlreadyExistsError, NotFoundError
from statecore.core._models import FlowCheckpoint, SessionRef
from statecore.store._inputs import (
    decode_json,
)
from statecore.store._state_contracts import FlowStore
from statecore.store.sql._batches import chunked
from statecore.store.sql._context import SqlContext
from statecore.store.sql._schema import flow_checkpoints

c = flow_checkpoints.c


def _out(values: RowMapping | Mapping[str, Any]) -> FlowCheckpoint:
    return FlowCheckpoint(
        flow_id=values["flow_id"],
        version=values["version"],
        step=values["step"],
        data=decode_json(values["data"]),
        conversation_seq=values["conversation_seq"],
        created_at=values["created_at"],
    )


class SqlFlowStore(FlowStore):
    def __init__(self, ctx: SqlContext) -> None:
        self._ctx = ctx

    async def _save(
        self, ref: SessionRef, flow_id: str, step: str, document: str
    ) -> FlowCheckpoint:
        self._ctx.check_fits_statement(document, "flow data")
        # The session lock orders checkpoints with appends: conversation_seq is exact and
        # two saves of one flow cannot pick the same version.
        session = await self._ctx.session_row(ref, lock=True)
        previous = await self._ctx.conn.scalar(
            select(func.max(c.version)).where(c.session_pk == session.id, c.flow_id == flow_id)
        )
        values = {
            "session_pk": session.id,
            "flow_id": flow_id,
            "version": (previous or 0) + 1,
            "step": step,
            "data": document,
            "conversation_seq": session.last_seq,
            "created_at": self._ctx.now,
        }
        await self._ctx.conn.execute(insert(flow_checkpoints).values(values))
        return _out(values)

    async def _latest(self, ref: SessionRef, flow_id: str) -> FlowCheckpoint | None:
        session = await self._ctx.session_row(ref)
        row = (
            await self._ctx.conn.execute(
                select(flow_checkpoints)
                .where(c.session_pk == session.id, c.flow_id == flow_id)
                .order_by(c.version.desc())
                .limit(1)
            )
        ).first()
        return None if row is None else _out(row._mapping)

    async def _load(self, ref: SessionRef, flow_id: str, version: int) -> FlowCheckpoint:
        session = await self._ctx.session_row(ref)
        row = (
            await self._ctx.conn.execute(
                select(flow_checkpoints).where(
                    c.session_pk == session.id, c.flow_id == flow_id, c.version == version
                )
            )
        ).first()
        if row is None:
            raise NotFoundError(
                f"flow {flow_id} of session {ref} has no version {version}; see flow.history()",
                flow_id=flow_id,
                version=version,
            )
        return _out(row._mapping)

    async def _history(self, ref: SessionRef, flow_id: str) -> list[FlowCheckpoint]:
        session = await self._ctx.session_row(ref)
        rows = await self._ctx.conn.execute(
            select(flow_checkpoints)
            .where(c.session_pk == session.id, c.flow_id == flow_id)
            .order_by(c.version)
        )
        return [_out(row._mapping) for row in rows]

    async def _flows(self, ref: SessionRef) -> list[str]:
        session = await self._ctx.session_row(ref)
        found = await self._ctx.conn.execute(
            select(c.flow_id).distinct().where(c.session_pk == session.id).order_by(c.flow_id)
        )
        return list(found.scalars())

    async def _count(self, ref: SessionRef) -> int:
        session = await self._ctx.session_row(ref)
        found = await self._ctx.conn.scalar(
            select(func.count()).select_from(flow_checkpoints).where(c.session_pk == session.id)
        )
        return int(found or 0)

    async def _restore(
        self, ref: SessionRef, checkpoints: list[tuple[FlowCheckpoint, str]]
    ) -> None:
        incoming: list[dict[str, Any]] = []
        for cp, document in checkpoints:
            self._ctx.check_fits_statement(document, "flow data")
            incoming.append(
                {
                    "flow_id": cp.flow_id,
                    "version": cp.version,
                    "step": cp.step,
                    "data": document,
                    "conversation_seq": cp.conversation_seq,
                    "created_at": cp.created_at,
                }
            )
        seen = {(row["flow_id"], row["version"]) for row in incoming}
        session = await self._ctx.session_row(ref, lock=True)
        if not incoming:
            return
        for chunk in chunked(list(seen)):
            clash = (
                await self._ctx.conn.execute(
                    select(c.flow_id, c.version)
                    .where(c.session_pk == session.id, tuple_(c.flow_id, c.version).in_(chunk))
                    .limit(1)
                )
            ).first()
            if clash is not None:
                raise AlreadyExistsError(
                    f"flow {clash.flow_id} of session {ref} already has version {clash.version}"
                )
        await self._ctx.conn.execute(
            insert(flow_checkpoints), [{"session_pk": session.id, **row} for row in incoming]
        )

    async def _clear(self, ref: SessionRef) -> int:
        session = await self._ctx.session_row(ref, lock=True)
        removed = await self._ctx.conn.execute(
            delete(flow_checkpoints).where(c.session_pk == session.id)
        )
        return removed.rowcount
