"""What a turn buffers until it commits: KV writes, flow checkpoints, the state document.

Reads see the turn's own buffered writes first, then SQL (through a local activity); nothing
is written until the turn commits, in one transaction with the rest of the turn. Used through
``statecore.workflow.Turn`` (``turn.kv``, ``turn.flow``, ``turn.state``). Sandbox-safe.
"""

from __future__ import annotations

import base64
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from statecore.contract._activities import (
    ACT_READ_FLOW,
    ACT_READ_KV,
    ACT_READ_STATE,
    FlowOp,
    KVOp,
    ReadFlowInput,
    ReadKVInput,
    ReadStateInput,
    ReadStateResult,
    StateOp,
)
from statecore.core._models import KVEntry, SessionRef, validate_key
from statecore.workflow._activity_calls import checked


class SessionReads(Protocol):
    """What the buffers read through: the turn's session (``TurnSession``)."""

    ref: SessionRef
    state_type: type[BaseModel] | None

    async def run_sql(self, name: str, arg: BaseModel, result_type: Any) -> Any: ...

TState = TypeVar("TState", bound=BaseModel)


class TurnKV:
    """KV access inside a turn: reads see the turn's own buffered writes first."""

    def __init__(self, session: SessionReads) -> None:
        self._session = session
        self._ops: list[KVOp] = []
        self._local: dict[tuple[str, str], Any] = {}
        self._deleted: set[tuple[str, str]] = set()

    async def get(self, bucket: str, key: str) -> Any:
        """The value (bytes or JSON) or None: the turn's own write if any, else SQL's."""
        if (bucket, key) in self._deleted:
            return None
        if (bucket, key) in self._local:
            return self._local[(bucket, key)]
        entry: KVEntry | None = await self._session.run_sql(
            ACT_READ_KV,
            ReadKVInput(ref=self._session.ref, bucket=bucket, key=key),
            KVEntry | None,
        )
        return None if entry is None else entry.value

    def put(
        self,
        bucket: str,
        key: str,
        value: Any,
        *,
        expected_revision: int | None = None,
        ttl_seconds: float | None = None,
    ) -> None:
        checked(lambda: validate_key(key))
        if isinstance(value, bytes | bytearray):
            encoded: dict[str, Any] = {
                "kind": "bytes",
                "value": base64.b64encode(bytes(value)).decode("ascii"),
            }
        else:
            encoded = {"value": value}
        op = checked(
            lambda: KVOp(
                op="put",
                bucket=bucket,
                key=key,
                expected_revision=expected_revision,
                ttl_seconds=ttl_seconds,
                **encoded,
            )
        )
        self._ops.append(op)
        self._local[(bucket, key)] = value
        self._deleted.discard((bucket, key))

    def delete(self, bucket: str, key: str, *, expected_revision: int | None = None) -> None:
        checked(lambda: validate_key(key))
        self._ops.append(
            checked(
                lambda: KVOp(
                    op="delete", bucket=bucket, key=key, expected_revision=expected_revision
                )
            )
        )
        self._local.pop((bucket, key), None)
        self._deleted.add((bucket, key))


class TurnFlow:
    """Flow checkpoints inside a turn (saved at commit, in order)."""

    def __init__(self, session: SessionReads) -> None:
        self._session = session
        self._ops: list[FlowOp] = []

    def save(self, flow_id: str, step: str, data: dict[str, Any] | None = None) -> None:
        self._ops.append(checked(lambda: FlowOp(flow_id=flow_id, step=step, data=data or {})))

    async def latest(self, flow_id: str) -> FlowOp | None:
        """The newest checkpoint: this turn's own if it saved one, else SQL's."""
        for op in reversed(self._ops):
            if op.flow_id == flow_id:
                return op
        found: FlowOp | None = await self._session.run_sql(
            ACT_READ_FLOW,
            ReadFlowInput(ref=self._session.ref, flow_id=flow_id),
            FlowOp | None,
        )
        return found


class TurnState(Generic[TState]):
    """The turn's view of its state: ``get`` sees this turn's update, ``update`` buffers a new
    document, ``reset`` discards the buffered one. Committed with the turn."""

    def __init__(self, session: SessionReads) -> None:
        self._session = session
        self._loaded = False
        self._base: TState | None = None
        self._version: int | None = None
        self._pending: TState | None = None

    def _type(self) -> type[TState]:
        state_type = self._session.state_type
        if state_type is None:
            raise ApplicationError(
                "this session has no state_type; pass TurnSession(..., state_type=Model)",
                type="InvalidInput",
                non_retryable=True,
            )
        return state_type  # type: ignore[return-value]

    async def get(self) -> TState:
        if self._pending is not None:
            return self._pending
        if not self._loaded:
            found: ReadStateResult = await self._session.run_sql(
                ACT_READ_STATE, ReadStateInput(ref=self._session.ref), ReadStateResult
            )
            state_type = self._type()
            self._base = (
                state_type.model_validate(found.state) if found.state is not None else state_type()
            )
            self._version = found.version
            self._loaded = True
        assert self._base is not None
        return self._base

    def update(self, state: TState) -> None:
        if not isinstance(state, self._type()):
            raise ApplicationError(
                f"state must be a {self._type().__name__}", type="InvalidInput", non_retryable=True
            )
        self._pending = state

    def reset(self) -> None:
        self._pending = None

    def _op(self) -> StateOp | None:
        if self._pending is None:
            return None
        return StateOp(state=self._pending.model_dump(mode="json"), expected_version=self._version)
