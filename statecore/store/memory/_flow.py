"""Flow checkpoints with their full history, in memory."""

from __future__ import annotations

from statecore.core._errors import AlreadyExistsError, NotFoundError
from statecore.core._models import FlowCheckpoint, SessionRef
from statecore.store._inputs import (
    decode_json,
)
from statecore.store._state_contracts import FlowStore
from statecore.store.memory._context import TxContext
from statecore.store.memory._schema import FlowRow


def _out(row: FlowRow) -> FlowCheckpoint:
    # A fresh copy of the data every time: callers may mutate what they get.
    return row.checkpoint.model_copy(update={"data": decode_json(row.document)})


class MemoryFlowStore(FlowStore):
    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx

    async def _save(
        self, ref: SessionRef, flow_id: str, step: str, document: str
    ) -> FlowCheckpoint:
        part = self._ctx.session_for_write(ref)
        history = part.flows.setdefault(flow_id, [])
        checkpoint = FlowCheckpoint(
            flow_id=flow_id,
            version=history[-1].checkpoint.version + 1 if history else 1,
            step=step,
            data=decode_json(document),
            conversation_seq=part.info.last_seq,
            created_at=self._ctx.now,
        )
        row = FlowRow(checkpoint=checkpoint, document=document)
        history.append(row)
        return _out(row)

    async def _latest(self, ref: SessionRef, flow_id: str) -> FlowCheckpoint | None:
        history = self._ctx.session(ref).flows.get(flow_id)
        return _out(history[-1]) if history else None

    async def _load(self, ref: SessionRef, flow_id: str, version: int) -> FlowCheckpoint:
        for row in self._ctx.session(ref).flows.get(flow_id, []):
            if row.checkpoint.version == version:
                return _out(row)
        raise NotFoundError(
            f"flow {flow_id} of session {ref} has no version {version}; see flow.history()",
            flow_id=flow_id,
            version=version,
        )

    async def _history(self, ref: SessionRef, flow_id: str) -> list[FlowCheckpoint]:
        return [_out(row) for row in self._ctx.session(ref).flows.get(flow_id, [])]

    async def _flows(self, ref: SessionRef) -> list[str]:
        return sorted(fid for fid, rows in self._ctx.session(ref).flows.items() if rows)

    async def _count(self, ref: SessionRef) -> int:
        return sum(len(rows) for rows in self._ctx.session(ref).flows.values())

    async def _restore(
        self, ref: SessionRef, checkpoints: list[tuple[FlowCheckpoint, str]]
    ) -> None:
        incoming = [FlowRow(checkpoint=cp, document=document) for cp, document in checkpoints]
        flows = self._ctx.session(ref).flows
        for row in incoming:
            cp = row.checkpoint
            if any(r.checkpoint.version == cp.version for r in flows.get(cp.flow_id, [])):
                raise AlreadyExistsError(
                    f"flow {cp.flow_id} of session {ref} already has version {cp.version}"
                )
        if not incoming:
            return
        part = self._ctx.session_for_write(ref)
        for row in incoming:
            part.flows.setdefault(row.checkpoint.flow_id, []).append(row)
        for rows in part.flows.values():
            rows.sort(key=lambda r: r.checkpoint.version)

    async def _clear(self, ref: SessionRef) -> int:
        if not self._ctx.session(ref).flows:
            return 0
        part = self._ctx.session_for_write(ref)
        removed = sum(len(rows) for rows in part.flows.values())
        part.flows = {}
        return removed
