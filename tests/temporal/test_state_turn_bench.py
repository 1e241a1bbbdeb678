"""The benchmark's state-only turns (bench/state_turns.py) do what they claim: each commits
one KV put and one message through the turn API, and the reading variant reads first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench.floor import FloorSession, noop
from bench.measure import Samples, floor_scenario, sequential
from bench.state_turns import STATE_AGENT, STATE_WORKFLOW, StateSession
from statecore.core._models import SessionRef
from statecore.store import open_store
from tests.dbs import fresh_database

pytestmark = pytest.mark.temporal


async def test_state_only_turns_commit_a_kv_put_and_a_message(
    env_factory: Callable[..., Any],
) -> None:
    async with (
        fresh_database("sqlite", "state") as url,
        env_factory(
            url, extra_workflows=[StateSession, FloorSession], extra_activities=[noop]
        ) as env,
    ):
        plain = floor_scenario(
            "state", "", env.client, env.task_queue, "turn", workflow_type=STATE_WORKFLOW
        )
        reads = floor_scenario(
            "reads", "", env.client, env.task_queue, "turn_reads", workflow_type=STATE_WORKFLOW
        )
        samples = Samples()
        await sequential(plain, "s-plain", 0, 3, samples)
        await sequential(reads, "s-reads", 0, 2, samples)
        assert len(samples.latencies) == 5
        store = await open_store(url)
        try:
            async with store.transaction() as tx:
                for session, turns in (("s-plain", 3), ("s-reads", 2)):
                    ref = SessionRef(agent_id=STATE_AGENT, session_id=session)
                    log = await tx.conversation.messages(ref)
                    note = await tx.kv.get(ref.kv_scope, "notes", "last")
                    assert [m.role for m in log] == ["user"] * turns
                    assert note is not None and note.value == {"turn": turns}
                    assert note.revision == turns
        finally:
            await store.close()
