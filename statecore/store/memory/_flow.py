"""Flow checkpoints with their full history, in memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from statecore.core._errors import AlreadyExistsError, InvalidInputError, NotFoundError
from statecore.core._models import FlowCheckpoint, SessionRef, validate_identifier
from statecore.store._base import FlowStore
from statecore.store._inputs import (
    check_aware,
    check_int,
    check_ref,
    checked_flow_save,
    decode_json,
    encode_state,
    revalidate,
)
from statecore.store.memory._context import TxContext
from statecore.store.memory._schema import FlowRow


def _out(row: FlowRow) -> FlowCheckpoint:
    # A fresh copy of the data every time: callers may mutate what they get.
    return row.checkpoint.model_copy(update={"data": decode_json(row.document)})


class MemoryFlowStore(FlowStore):
    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx

    async def save(
        self, ref: SessionRef, flow_id: str, step: str, data: dict[str, Any]
    ) -> FlowCheckpoint:
        document = checked_flow_save(ref, flow_id, step, data)
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

    async def latest(self, ref: SessionRef, flow_id: str) -> FlowCheckpoint | None:
        check_ref(ref)
        validate_identifier(flow_id, "flow_id")
        history = self._ctx.session(ref).flows.get(flow_id)
        return _out(history[-1]) if history else None

    async def load(self, ref: SessionRef, flow_id: str, version: int) -> FlowCheckpoint:
        check_ref(ref)
        validate_identifier(flow_id, "flow_id")
        check_int(version, "version", minimum=1)
        for row in self._ctx.session(ref).flows.get(flow_id, []):
            if row.checkpoint.version == version:
                return _out(row)
        raise NotFoundError(
            f"flow {flow_id} of session {ref} has no version {version}; see flow.history()",
            flow_id=flow_id,
            version=version,
        )

    async def history(self, ref: SessionRef, flow_id: str) -> list[FlowCheckpoint]:
        check_ref(ref)
        validate_identifier(flow_id, "flow_id")
        return [_out(row) for row in self._ctx.session(ref).flows.get(flow_id, [])]

    async def flows(self, ref: SessionRef) -> list[str]:
        check_ref(ref)
        return sorted(fid for fid, rows in self._ctx.session(ref).flows.items() if rows)

    async def count(self, ref: SessionRef) -> int:
        check_ref(ref)
        return sum(len(rows) for rows in self._ctx.session(ref).flows.values())

    async def restore(self, ref: SessionRef, checkpoints: Sequence[FlowCheckpoint]) -> None:
        check_ref(ref)
        incoming: list[FlowRow] = []
        seen: set[tuple[str, int]] = set()
        for item in checkpoints:
            cp = revalidate(FlowCheckpoint, item, "flow checkpoint")
            validate_identifier(cp.flow_id, "flow_id")
            validate_identifier(cp.step, "step")
            document = encode_state(cp.data, "flow data")
            if (cp.flow_id, cp.version) in seen:
                raise InvalidInputError(f"flow {cp.flow_id} version {cp.version} appears twice")
            seen.add((cp.flow_id, cp.version))
            cp = cp.model_copy(update={"created_at": check_aware(cp.created_at, "created_at")})
            incoming.append(FlowRow(checkpoint=cp, document=document))
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

    async def clear(self, ref: SessionRef) -> int:
        check_ref(ref)
        if not self._ctx.session(ref).flows:
            return 0
        part = self._ctx.session_for_write(ref)
        removed = sum(len(rows) for rows in part.flows.values())
        part.flows = {}
        return removed
