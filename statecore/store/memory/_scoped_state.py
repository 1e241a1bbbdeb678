"""Scoped state: one versioned JSON document per (namespace, task_id, agent_id)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from statecore.core._errors import AlreadyExistsError
from statecore.core._models import ScopedState, validate_identifier
from statecore.store._base import ScopedStateStore
from statecore.store._inputs import (
    check_aware,
    check_int,
    check_state_version,
    decode_json,
    encode_state,
    revalidate,
)
from statecore.store.memory._context import TxContext
from statecore.store.memory._schema import StateKey, StateRow


def _key(namespace: str, task_id: str, agent_id: str) -> StateKey:
    validate_identifier(namespace, "namespace")
    validate_identifier(task_id, "task_id")
    validate_identifier(agent_id, "agent_id")
    return (namespace, task_id, agent_id)


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

    async def create(
        self, namespace: str, task_id: str, agent_id: str, state: dict[str, Any]
    ) -> ScopedState:
        key = _key(namespace, task_id, agent_id)
        document = encode_state(state)
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

    async def get(self, namespace: str, task_id: str, agent_id: str) -> ScopedState | None:
        key = _key(namespace, task_id, agent_id)
        row = self._ctx.ws.states.get(key)
        return None if row is None else _out(key, row)

    async def update(
        self,
        namespace: str,
        task_id: str,
        agent_id: str,
        state: dict[str, Any],
        *,
        expected_version: int | None = None,
    ) -> ScopedState:
        key = _key(namespace, task_id, agent_id)
        document = encode_state(state)
        if expected_version is not None:
            check_int(expected_version, "expected_version", minimum=1)
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

    async def delete(self, namespace: str, task_id: str, agent_id: str) -> bool:
        return self._ctx.ws.states.delete(_key(namespace, task_id, agent_id))

    async def list(self, namespace: str, *, task_id: str | None = None) -> list[ScopedState]:
        validate_identifier(namespace, "namespace")
        if task_id is not None:
            validate_identifier(task_id, "task_id")
        found = sorted(
            (key, row)
            for key, row in self._ctx.ws.states.items()
            if key[0] == namespace and (task_id is None or key[1] == task_id)
        )
        return [_out(key, row) for key, row in found]

    async def restore(self, states: Sequence[ScopedState]) -> None:
        rows: list[tuple[StateKey, StateRow]] = []
        for item in states:
            state = revalidate(ScopedState, item, "scoped state")
            key = _key(state.namespace, state.task_id, state.agent_id)
            rows.append(
                (
                    key,
                    StateRow(
                        document=encode_state(state.state),
                        version=state.version,
                        created_at=check_aware(state.created_at, "created_at"),
                        updated_at=check_aware(state.updated_at, "updated_at"),
                    ),
                )
            )
        ws = self._ctx.ws
        for key, row in rows:
            ws.states.put(key, row)
