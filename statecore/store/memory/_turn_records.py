"""Turn records in memory: a session's turn id -> record text, in its partition."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from statecore.core._errors import RevisionConflictError
from statecore.core._models import SessionRef
from statecore.store._base import TurnRecordStore
from statecore.store._inputs import check_ref, checked_turn_id, decode_json, encode_turn_record
from statecore.store.memory._context import TxContext, session_key


class MemoryTurnRecordStore(TurnRecordStore):
    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx

    async def get(self, ref: SessionRef, turn_id: str) -> Any | None:
        turn_id = checked_turn_id(ref, turn_id)
        part = self._ctx.ws.sessions.get(session_key(ref))
        text = None if part is None else part.turns.get(turn_id)
        return None if text is None else decode_json(text)

    async def insert(self, ref: SessionRef, turn_id: str, value: Any) -> None:
        turn_id = checked_turn_id(ref, turn_id)
        text = encode_turn_record(value)
        if turn_id in self._ctx.session(ref).turns:
            raise RevisionConflictError(
                f"turn {turn_id} of session {ref} is already committed; read its record instead",
                current=1,
                expected=0,
            )
        self._ctx.session_for_write(ref).turns[turn_id] = text

    async def count(self, ref: SessionRef) -> int:
        check_ref(ref)
        part = self._ctx.ws.sessions.get(session_key(ref))
        return 0 if part is None else len(part.turns)

    async def records(self, ref: SessionRef) -> list[tuple[str, Any]]:
        check_ref(ref)
        part = self._ctx.ws.sessions.get(session_key(ref))
        if part is None:
            return []
        return [(turn_id, decode_json(part.turns[turn_id])) for turn_id in sorted(part.turns)]

    async def restore(self, ref: SessionRef, records: Sequence[tuple[str, Any]]) -> None:
        check_ref(ref)
        encoded = {
            checked_turn_id(ref, turn_id): encode_turn_record(value) for turn_id, value in records
        }
        self._ctx.session_for_write(ref).turns.update(encoded)

    async def clear(self, ref: SessionRef) -> int:
        check_ref(ref)
        if self._ctx.ws.sessions.get(session_key(ref)) is None:
            return 0
        part = self._ctx.session_for_write(ref)
        removed = len(part.turns)
        part.turns.clear()
        return removed
