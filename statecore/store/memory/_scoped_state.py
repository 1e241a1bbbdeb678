"""Scoped state: one versioned JSON document per (namespace, task_id, agent_id)."""

from __future__ import annotations

from statecore.core._errors import AlreadyExistsError
from statecore.core._models import ScopedState
from statecore.store._inputs import (
    RestoredState,
    check_state_version,
    decode_json,
)
from statecore.store._state_contracts import ScopedStateStore
from statecore.store.memory._context import TxContext
from statecore.store.memory._schema import StateKey, StateRow


def _out(key: StateKey, row: StateRow) -> ScopedState:
    return ScopedState(
        namespace=key[0],
        task_id=key[1],
        agent_id=key[2],
        state=decode_json(row.document),
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class MemoryScopedStateStore(ScopedStateStore):
    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx

    async def _create(
        self, namespace: str, task_id: str, agent_id: str, document: str
    ) -> ScopedState:
        key = (namespace, task_id, agent_id)
        ws, now = self._ctx.ws, self._ctx.now
        if ws.states.get(key) is not None:
            raise AlreadyExistsError(
                f"task {task_id} / agent {agent_id} already has state; update it instead",
                task_id=task_id,
                agent_id=agent_id,
            )
        row = StateRow(document=document, version=1, created_at=now, updated_at=now)
        ws.states.put(key, row)
        return _out(key, row)

    async def _get(self, namespace: str, task_id: str, agent_id: str) -> ScopedState | None:
        key = (namespace, task_id, agent_id)
        row = self._ctx.ws.states.get(key)
        return None if row is None else _out(key, row)

    async def _update(
        self,
        namespace: str,
        task_id: str,
        agent_id: str,
        document: str,
        expected_version: int | None,
    ) -> ScopedState:
        key = (namespace, task_id, agent_id)
        ws = self._ctx.ws
        current = ws.states.get(key)
        current = check_state_version(current, expected_version, task_id, agent_id)
        row = StateRow(
            document=document,
            version=current.version + 1,
            created_at=current.created_at,
            updated_at=self._ctx.now,
        )
        ws.states.put(key, row)
        return _out(key, row)

    async def _delete(self, namespace: str, task_id: str, agent_id: str) -> bool:
        return self._ctx.ws.states.delete((namespace, task_id, agent_id))

    async def _list(self, namespace: str, task_id: str | None) -> list[ScopedState]:
        found = sorted(
            (key, row)
            for key, row in self._ctx.ws.states.items()
            if key[0] == namespace and (task_id is None or key[1] == task_id)
        )
        return [_out(key, row) for key, row in found]

    async def _restore(self, states: list[RestoredState]) -> None:
        rows = [
            (
                (state.namespace, state.task_id, state.agent_id),
                StateRow(
                    document=state.document,
                    version=state.version,
                    created_at=state.created_at,
                    updated_at=state.updated_at,
                ),
            )
            for state in states
        ]
        ws = self._ctx.ws
        for key, row in rows:
            ws.states.put(key, row)
