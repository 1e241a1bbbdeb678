"""The storage contract's JSON documents: scoped state (one document per namespace, task
and agent) and flow checkpoints (every version of a flow kept). Arguments are checked here,
once for every backend; a backend implements the ``_``-prefixed methods."""

from __future__ import annotations

import abc
import builtins
from collections.abc import Sequence
from typing import Any

from statecore.core._models import (
    FlowCheckpoint,
    ScopedState,
    SessionRef,
    validate_identifier,
)
from statecore.store import _change_rules as changes
from statecore.store._change_ledger import RecordsChanges
from statecore.store._inputs import (
    RestoredState,
    check_int,
    check_ref,
    check_state_scope,
    checked_flow_checkpoints,
    checked_flow_save,
    checked_states,
    encode_state,
)


class ScopedStateStore(RecordsChanges, abc.ABC, changes=changes.STATE):
    """Scoped state: one JSON document per (namespace, task_id, agent_id), at most
    MAX_STATE_BYTES (16 MiB). Arguments are checked here; a backend implements the ``_``
    methods."""

    async def create(
        self, namespace: str, task_id: str, agent_id: str, state: dict[str, Any]
    ) -> ScopedState:
        """Create version 1; AlreadyExistsError if the scope has a document."""
        check_state_scope(namespace, task_id, agent_id)
        return await self._create(namespace, task_id, agent_id, encode_state(state))

    @abc.abstractmethod
    async def _create(
        self, namespace: str, task_id: str, agent_id: str, document: str
    ) -> ScopedState: ...

    async def get(self, namespace: str, task_id: str, agent_id: str) -> ScopedState | None:
        check_state_scope(namespace, task_id, agent_id)
        return await self._get(namespace, task_id, agent_id)

    @abc.abstractmethod
    async def _get(self, namespace: str, task_id: str, agent_id: str) -> ScopedState | None: ...

    async def update(
        self,
        namespace: str,
        task_id: str,
        agent_id: str,
        state: dict[str, Any],
        *,
        expected_version: int | None = None,
    ) -> ScopedState:
        """Replace the document (version + 1). NotFoundError if absent; VersionConflictError
        when ``expected_version`` is given and stale; StateTooLargeError over MAX_STATE_BYTES."""
        check_state_scope(namespace, task_id, agent_id)
        document = encode_state(state)
        if expected_version is not None:
            check_int(expected_version, "expected_version", minimum=1)
        return await self._update(namespace, task_id, agent_id, document, expected_version)

    @abc.abstractmethod
    async def _update(
        self,
        namespace: str,
        task_id: str,
        agent_id: str,
        document: str,
        expected_version: int | None,
    ) -> ScopedState: ...

    async def delete(self, namespace: str, task_id: str, agent_id: str) -> bool:
        check_state_scope(namespace, task_id, agent_id)
        return await self._delete(namespace, task_id, agent_id)

    @abc.abstractmethod
    async def _delete(self, namespace: str, task_id: str, agent_id: str) -> bool: ...

    async def list(
        self, namespace: str, *, task_id: str | None = None
    ) -> builtins.list[ScopedState]:
        validate_identifier(namespace, "namespace")
        if task_id is not None:
            validate_identifier(task_id, "task_id")
        return await self._list(namespace, task_id)

    @abc.abstractmethod
    async def _list(self, namespace: str, task_id: str | None) -> builtins.list[ScopedState]: ...

    async def restore(self, states: Sequence[ScopedState]) -> None:
        """Write exported documents verbatim; a scope given twice keeps its last document."""
        await self._restore(checked_states(states))

    @abc.abstractmethod
    async def _restore(self, states: builtins.list[RestoredState]) -> None: ...


class FlowStore(RecordsChanges, abc.ABC, changes=changes.FLOW):
    """Flow checkpoints with full history (time travel and fork). Arguments are checked
    here; a backend implements the ``_`` methods."""

    async def save(
        self, ref: SessionRef, flow_id: str, step: str, data: dict[str, Any]
    ) -> FlowCheckpoint:
        """Append a checkpoint; its version is the flow's previous version + 1 (first is 1).
        ``conversation_seq`` records the session's last seq at this moment."""
        document = checked_flow_save(ref, flow_id, step, data)
        return await self._save(ref, flow_id, step, document)

    @abc.abstractmethod
    async def _save(
        self, ref: SessionRef, flow_id: str, step: str, document: str
    ) -> FlowCheckpoint:
        """``save``, with the data as the JSON document to store."""

    async def latest(self, ref: SessionRef, flow_id: str) -> FlowCheckpoint | None:
        check_ref(ref)
        validate_identifier(flow_id, "flow_id")
        return await self._latest(ref, flow_id)

    @abc.abstractmethod
    async def _latest(self, ref: SessionRef, flow_id: str) -> FlowCheckpoint | None: ...

    async def load(self, ref: SessionRef, flow_id: str, version: int) -> FlowCheckpoint:
        """A given version; NotFoundError if it does not exist."""
        check_ref(ref)
        validate_identifier(flow_id, "flow_id")
        check_int(version, "version", minimum=1)
        return await self._load(ref, flow_id, version)

    @abc.abstractmethod
    async def _load(self, ref: SessionRef, flow_id: str, version: int) -> FlowCheckpoint: ...

    async def history(self, ref: SessionRef, flow_id: str) -> builtins.list[FlowCheckpoint]:
        """All versions, oldest first."""
        check_ref(ref)
        validate_identifier(flow_id, "flow_id")
        return await self._history(ref, flow_id)

    @abc.abstractmethod
    async def _history(self, ref: SessionRef, flow_id: str) -> builtins.list[FlowCheckpoint]: ...

    async def flows(self, ref: SessionRef) -> builtins.list[str]:
        check_ref(ref)
        return await self._flows(ref)

    @abc.abstractmethod
    async def _flows(self, ref: SessionRef) -> builtins.list[str]: ...

    async def count(self, ref: SessionRef) -> int:
        """Checkpoints stored for the session, all flows."""
        check_ref(ref)
        return await self._count(ref)

    @abc.abstractmethod
    async def _count(self, ref: SessionRef) -> int: ...

    async def restore(self, ref: SessionRef, checkpoints: Sequence[FlowCheckpoint]) -> None:
        """Write exported checkpoints verbatim; AlreadyExistsError if a version exists."""
        check_ref(ref)
        await self._restore(ref, checked_flow_checkpoints(checkpoints))

    @abc.abstractmethod
    async def _restore(
        self, ref: SessionRef, checkpoints: builtins.list[tuple[FlowCheckpoint, str]]
    ) -> None:
        """``restore``: each checkpoint with its data as the JSON document to store."""

    async def clear(self, ref: SessionRef) -> int:
        check_ref(ref)
        return await self._clear(ref)

    @abc.abstractmethod
    async def _clear(self, ref: SessionRef) -> int: ...
