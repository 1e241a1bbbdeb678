"""A session's orchestration state, in memory.

Every change is a new immutable row (partial, immutable updates) and restarts the
session's idle clock, because orchestration activity is session activity."""

from __future__ import annotations

from dataclasses import replace

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
from statecore.store.memory._context import TxContext
from statecore.store.memory._schema import OrchestrationRow, SessionPartition


def _out(part: SessionPartition, row: OrchestrationRow) -> OrchestrationState:
    return OrchestrationState(
        active_step=row.active_step,
        recently_used_tools=list(row.recently_used_tools),
        sequence_index=row.sequence_index,
        cumulative_token_usage=TokenUsage(
            prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens
        ),
        last_accessed=part.info.last_accessed,
        ttl_seconds=part.info.ttl_seconds,
    )


class MemoryOrchestrationStore(OrchestrationStore):
    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx

    def _write(
        self, ref: SessionRef, row: OrchestrationRow, ttl_seconds: int | None = None
    ) -> OrchestrationState:
        part = self._ctx.session_for_write(ref)
        changes: dict[str, object] = {"last_accessed": self._ctx.now}
        if ttl_seconds is not None:
            changes["ttl_seconds"] = ttl_seconds
        part.info = part.info.model_copy(update=changes)
        part.orchestration = row
        return _out(part, row)

    def _current(self, ref: SessionRef) -> OrchestrationRow:
        return self._ctx.session(ref).orchestration or OrchestrationRow()

    async def get(self, ref: SessionRef) -> OrchestrationState | None:
        check_ref(ref)
        part = self._ctx.session(ref)
        return None if part.orchestration is None else _out(part, part.orchestration)

    async def get_or_create(self, ref: SessionRef) -> OrchestrationState:
        check_ref(ref)
        part = self._ctx.session(ref)
        if part.orchestration is not None:
            return _out(part, part.orchestration)
        return self._write(ref, OrchestrationRow())

    async def update(self, ref: SessionRef, update: OrchestrationUpdate) -> OrchestrationState:
        check_ref(ref)
        changes, ttl = checked_orchestration_update(update)
        return self._write(ref, replace(self._current(ref), **changes), ttl)  # type: ignore[arg-type]

    async def set_active_step(self, ref: SessionRef, step: str | None) -> OrchestrationState:
        check_ref(ref)
        if step is not None:
            validate_identifier(step, "step")
        return self._write(ref, replace(self._current(ref), active_step=step))

    async def add_used_tool(self, ref: SessionRef, tool: str) -> OrchestrationState:
        check_ref(ref)
        validate_identifier(tool, "tool")
        row = self._current(ref)
        tools = recent_tools([*row.recently_used_tools, tool])
        return self._write(ref, replace(row, recently_used_tools=tools))

    async def advance_sequence(self, ref: SessionRef) -> OrchestrationState:
        check_ref(ref)
        row = self._current(ref)
        return self._write(ref, replace(row, sequence_index=row.sequence_index + 1))

    async def add_token_usage(
        self, ref: SessionRef, prompt_tokens: int, completion_tokens: int
    ) -> OrchestrationState:
        check_token_usage(ref, prompt_tokens, completion_tokens)
        row = self._current(ref)
        return self._write(
            ref,
            replace(
                row,
                prompt_tokens=row.prompt_tokens + prompt_tokens,
                completion_tokens=row.completion_tokens + completion_tokens,
            ),
        )

    async def reset(self, ref: SessionRef) -> bool:
        check_ref(ref)
        if self._ctx.session(ref).orchestration is None:
            return False
        part = self._ctx.session_for_write(ref)
        part.orchestration = None
        return True

    async def restore(self, ref: SessionRef, state: OrchestrationState) -> None:
        """Write the orchestration fields verbatim; the session keeps its own idle clock."""
        check_ref(ref)
        state = revalidate(OrchestrationState, state, "orchestration state")
        row = OrchestrationRow(
            active_step=(
                None
                if state.active_step is None
                else validate_identifier(state.active_step, "active_step")
            ),
            recently_used_tools=recent_tools(state.recently_used_tools),
            sequence_index=check_int(state.sequence_index, "sequence_index"),
            prompt_tokens=check_int(state.cumulative_token_usage.prompt_tokens, "prompt_tokens"),
            completion_tokens=check_int(
                state.cumulative_token_usage.completion_tokens, "completion_tokens"
            ),
        )
        part = self._ctx.session_for_write(ref)
        part.orchestration = row
