"""The live session each catalog entry is applied to, with rows in every store, and the
turn that shows it still works afterwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from temporalio.client import WorkflowHandle

from statecore.core._models import SessionRef
from statecore.store import open_store
from tests.catalog.bad_inputs import Entry, TurnApi
from tests.catalog.conftest import CatalogEnv


@dataclass
class Subject:
    """One entry's session: an AgentSession workflow, or a CatalogAgent one for entries of
    the turn API."""

    ref: SessionRef
    handle: WorkflowHandle[Any, Any]
    turn_api: bool
    #: Work an entry started before its rows were read (a turn held mid-way).
    pending: dict[str, Any] = field(default_factory=dict)


async def _seed_stores(env: CatalogEnv, ref: SessionRef, *, scoped_state: bool) -> None:
    """Rows in the stores a turn does not write by itself."""
    store = await open_store(env.database_url)
    try:
        async with store.transaction() as tx:
            await tx.conversation.add_hint(ref, "prefers short answers")
            await tx.kv.put(ref.kv_scope, "prefs", "theme", "dark")
            await tx.flow.save(ref, "plan", "start", {"step": 1})
            if scoped_state:
                await tx.state.create(ref.namespace, ref.session_id, ref.agent_id, {"n": 1})
    finally:
        await store.close()


async def open_subject(env: CatalogEnv, entry: Entry) -> Subject:
    """A session of its own for ``entry``: one committed turn, plus a hint, a KV entry, a
    flow checkpoint and a scoped-state document."""
    ref = SessionRef(agent_id=env.agent, session_id=entry.id)
    if isinstance(entry.apply, TurnApi):
        handle = await env.client.start_workflow(
            "CatalogAgent",
            ref,
            id=f"catalog-agent:{env.agent}:{entry.id}",
            task_queue=env.task_queue,
        )
        seed = {
            "turn_id": "seed",
            "content": "seed message",
            "kv": [{"bucket": "prefs", "key": "seeded", "value": {"n": 1}}],
            "notes_size": 10,
        }
        assert await handle.execute_update("turn", seed, result_type=int) == 1
        await _seed_stores(env, ref, scoped_state=False)
        return Subject(ref, handle, turn_api=True)
    result = await env.sessions.send(ref.agent_id, ref.session_id, "seed message", turn_id="seed")
    assert result.turn == 1
    await _seed_stores(env, ref, scoped_state=True)
    return Subject(ref, env.sessions.handle(ref.agent_id, ref.session_id), turn_api=False)


async def follow_up(env: CatalogEnv, subject: Subject) -> None:
    """A valid turn after the bad input: it must commit as the next turn."""
    ref = subject.ref
    if subject.turn_api:
        before = int(subject.pending.get("turns", 1))
        after = {"turn_id": "after", "content": "still here", "notes_size": 3}
        assert await subject.handle.execute_update("turn", after, result_type=int) == before + 1
        return
    result = await env.sessions.send(ref.agent_id, ref.session_id, "still here", turn_id="after")
    assert result.turn == 2
    assert not result.duplicate
    report = await env.sessions.describe(ref.agent_id, ref.session_id)
    assert report.checkpoint.status == "active"
    assert report.checkpoint.turn == 2
