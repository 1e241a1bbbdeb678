"""The ``tools`` and ``task`` slots of a session, kept in reserved KV buckets of a session.

Both are thin facades over ``StoreTransaction.kv``: no backend code lives here, so every
backend gets them for free. Tool data lives in buckets ``tool.<tool name>``, task records in
the bucket ``task.records``. User buckets may not use these names (``validate_user_bucket``,
see ``statecore.store._bucket_owners``), which keeps "reset kv", "reset tools" and "reset task"
exact: each clears its own buckets and never another's.
"""

from __future__ import annotations

import builtins
from typing import Any

from statecore.core._errors import InvalidInputError, NotFoundError
from statecore.core._limits import MAX_PAGE_SIZE
from statecore.core._models import (
    KeyPage,
    KVEntry,
    SessionRef,
    TaskRecord,
    TaskTransition,
    validate_identifier,
    validate_key,
    validate_text,
)
from statecore.store._base import StoreTransaction
from statecore.store._bucket_owners import (
    TASK_BUCKET_PREFIX,
    TOOL_BUCKET_PREFIX,
    clear_bucket,
    validate_user_bucket,
)

TASK_BUCKET = TASK_BUCKET_PREFIX + "records"
#: Where a new task starts (the A2A initial task state).
INITIAL_TASK_STATE = "submitted"
MAX_REASON_LENGTH = 2000


def tool_bucket(tool: str) -> str:
    """The KV bucket holding ``tool``'s data."""
    return TOOL_BUCKET_PREFIX + validate_identifier(tool, "tool")


class ToolSlots:
    """Storage owned by tools of one session: per tool, keys -> JSON or bytes. Valid inside
    the transaction it was created with."""

    def __init__(self, tx: StoreTransaction, ref: SessionRef) -> None:
        self._kv = tx.kv
        self._scope = ref.kv_scope

    async def put(
        self, tool: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> int:
        """Write a value and return its new revision (see ``KVStore.put``)."""
        return await self._kv.put(
            self._scope,
            tool_bucket(tool),
            validate_key(key),
            value,
            expected_revision=expected_revision,
        )

    async def get(self, tool: str, key: str) -> KVEntry | None:
        return await self._kv.get(self._scope, tool_bucket(tool), validate_key(key))

    async def list(
        self, tool: str, prefix: str = "", *, limit: int = 100, after: str | None = None
    ) -> KeyPage:
        """Keys of ``tool`` starting with ``prefix``, one page at a time."""
        return await self._kv.list_keys(
            self._scope, tool_bucket(tool), prefix, limit=limit, after=after
        )

    async def delete(self, tool: str, key: str) -> bool:
        return await self._kv.delete(self._scope, tool_bucket(tool), validate_key(key))

    async def tools(self) -> builtins.list[str]:
        """Names of tools that have data in this session."""
        buckets = await self._kv.buckets(self._scope)
        return sorted(
            b.removeprefix(TOOL_BUCKET_PREFIX) for b in buckets if b.startswith(TOOL_BUCKET_PREFIX)
        )

    async def clear(self, tool: str | None = None) -> int:
        """Delete one tool's data, or every tool's when ``tool`` is None; returns keys deleted."""
        if tool is None:
            return await self._kv.clear(self._scope, TOOL_BUCKET_PREFIX)
        # clear_bucket keeps "tool.web" from reaching into "tool.websearch".
        present = await self._kv.buckets(self._scope)
        return await clear_bucket(self._kv, self._scope, tool_bucket(tool), present)


class TaskSlots:
    """Task metadata of one session with its lifecycle history.

    Each record is one KV entry; every write names the revision it read, so two concurrent
    transitions of the same task conflict (RevisionConflictError) instead of one silently
    dropping the other's history entry."""

    def __init__(self, tx: StoreTransaction, ref: SessionRef) -> None:
        self._kv = tx.kv
        self._scope = ref.kv_scope
        self._now = tx.now

    async def _read(self, task_id: str) -> tuple[TaskRecord | None, int]:
        entry = await self._kv.get(self._scope, TASK_BUCKET, validate_key(task_id))
        if entry is None:
            return None, 0
        return TaskRecord.model_validate(entry.value), entry.revision

    async def _write(self, record: TaskRecord, revision: int) -> None:
        await self._kv.put(
            self._scope,
            TASK_BUCKET,
            record.task_id,
            record.model_dump(mode="json"),
            expected_revision=revision,
        )

    async def upsert(self, task_id: str, metadata: dict[str, Any]) -> TaskRecord:
        """Create the task (state ``submitted``) or replace its metadata, keeping its state
        and history."""
        record, revision = await self._read(task_id)
        if record is None:
            record = TaskRecord(
                task_id=task_id,
                state=INITIAL_TASK_STATE,
                metadata=metadata,
                state_history=[
                    TaskTransition(from_state=None, to_state=INITIAL_TASK_STATE, at=self._now)
                ],
            )
        else:
            record = TaskRecord(
                task_id=task_id,
                state=record.state,
                metadata=metadata,
                state_history=record.state_history,
            )
        await self._write(record, revision)
        return record

    async def transition(self, task_id: str, to_state: str, reason: str = "") -> TaskRecord:
        """Move the task to ``to_state`` and append the change to ``state_history``.
        NotFoundError if the task was never upserted."""
        validate_identifier(to_state, "task state")
        validate_text(reason, "reason")
        if len(reason) > MAX_REASON_LENGTH:
            raise InvalidInputError(
                f"reason is {len(reason)} characters; the limit is {MAX_REASON_LENGTH}"
            )
        record, revision = await self._read(task_id)
        if record is None:
            raise NotFoundError(
                f"task {task_id!r} does not exist in this session; upsert it first",
                task_id=task_id,
            )
        step = TaskTransition(
            from_state=record.state, to_state=to_state, reason=reason, at=self._now
        )
        record = record.model_copy(
            update={"state": to_state, "state_history": [*record.state_history, step]}
        )
        await self._write(record, revision)
        return record

    async def get(self, task_id: str) -> TaskRecord | None:
        record, _ = await self._read(task_id)
        return record

    async def list(self) -> list[TaskRecord]:
        """Every task of the session, ordered by task id."""
        records: list[TaskRecord] = []
        after: str | None = None
        while True:
            page = await self._kv.list_keys(
                self._scope, TASK_BUCKET, "", limit=MAX_PAGE_SIZE, after=after
            )
            for key in page.keys:
                record = await self.get(key)
                if record is not None:
                    records.append(record)
            if page.next_after is None:
                return records
            after = page.next_after


__all__ = [
    "INITIAL_TASK_STATE",
    "TASK_BUCKET",
    "TaskSlots",
    "ToolSlots",
    "tool_bucket",
    "validate_user_bucket",
]
