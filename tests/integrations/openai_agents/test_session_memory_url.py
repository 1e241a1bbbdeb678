"""``memory://`` is one store per process for StatecoreSession, as a database URL is one
database: a second session on the same URL and id sees what the first stored."""

from __future__ import annotations

import asyncio
import uuid

from statecore.integrations.openai_agents import StatecoreSession

ITEM = {"role": "user", "content": "remember me"}


async def test_a_second_session_on_memory_sees_the_first_ones_items() -> None:
    session_id = f"hitl-{uuid.uuid4().hex[:8]}"
    first = StatecoreSession(session_id, database_url="memory://")
    await first.add_items([ITEM])
    await first.close()  # closing one session does not empty the process's store
    rehydrated = StatecoreSession(session_id, database_url=" MEMORY:// ")
    assert await rehydrated.get_items() == [ITEM]
    await rehydrated.add_items([{"role": "user", "content": "second"}])
    assert len(await first.get_items()) == 2
    # Other ids, agent ids and namespaces stay apart.
    assert await StatecoreSession(f"{session_id}-x", database_url="memory://").get_items() == []
    assert (
        await StatecoreSession(session_id, database_url="memory://", agent_id="b").get_items() == []
    )
    await rehydrated.clear_session()
    assert await first.get_items() == []


def test_memory_is_shared_across_event_loops_and_sync_code() -> None:
    session_id = f"loops-{uuid.uuid4().hex[:8]}"
    asyncio.run(StatecoreSession(session_id, database_url="memory://").add_items([ITEM]))
    other = StatecoreSession(session_id, database_url="memory://")
    assert asyncio.run(other.get_items()) == [ITEM]
    other.close()
    assert asyncio.run(other.get_items()) == [ITEM]
