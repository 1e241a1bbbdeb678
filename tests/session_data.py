"""A session with data in every store, and a way to read a session back for comparison."""

from __future__ import annotations

from typing import Any

from statecore.core._errors import SessionNotFoundError
from statecore.core._models import Message, SessionRef
from statecore.operations._bundles import export_session
from statecore.operations._turn_commit import TURN_META_BUCKET
from statecore.store._base import StateStore
from statecore.store._tool_and_task_buckets import TaskSlots, ToolSlots


async def populate(store: StateStore, ref: SessionRef, *, turns: int = 3) -> None:
    """Fill all seven stores of ``ref``: two messages, a turn record and one flow
    checkpoint per turn,
    a summary of turn 0 with the window after it, a hint, user KV (JSON and bytes), tool
    data, a task with history, scoped state and orchestration state."""
    async with store.transaction() as tx:
        await tx.sessions.ensure(ref, ttl_seconds=3600)
        await tx.conversation.set_system_prompt(ref, "You are terse.")
        for turn in range(turns):
            await tx.conversation.append(
                ref,
                f"turn-{turn}",
                [
                    Message(role="user", content=f"question {turn} in {ref}"),
                    Message(role="assistant", content=f"answer {turn} with some more words"),
                ],
            )
            await tx.flow.save(ref, "plan", f"step-{turn}", {"turn": turn})
            # What statecore.operations._turn_commit records for each committed turn.
            await tx.turns.insert(ref, f"turn-{turn}", [turn + 1])
            await tx.kv.put(ref.kv_scope, TURN_META_BUCKET, "latest", {"turn": turn + 1})
        await tx.conversation.set_summary(ref, "The user asked question 0.", 2)
        await tx.conversation.set_window_start(ref, 3)
        await tx.conversation.add_hint(ref, "prefer metric units")
        await tx.kv.put(ref.kv_scope, "prefs", "theme", "dark")
        await tx.kv.put(ref.kv_scope, "blobs", "b", b"\x00\x01\xff")
        await ToolSlots(tx, ref).put("search", "last", {"q": "weather"})
        tasks = TaskSlots(tx, ref)
        await tasks.upsert("task-1", {"title": "report"})
        await tasks.transition("task-1", "working", "started")
        await tx.state.create(ref.namespace, ref.session_id, ref.agent_id, {"step": 1})
        await tx.orchestration.set_active_step(ref, "research")
        await tx.orchestration.add_used_tool(ref, "search")
        await tx.orchestration.add_token_usage(ref, 10, 5)


async def snapshot(store: StateStore, ref: SessionRef) -> dict[str, Any] | None:
    """Everything ``ref`` holds, comparable with ==; None when the session does not exist."""
    try:
        bundle = await export_session(store, ref)
    except SessionNotFoundError:
        return None
    return bundle.model_dump(mode="json", exclude={"exported_at"})
