"""What operators see without touching SQL: search attributes, current details, auto-summary."""

from __future__ import annotations

import json
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata

from statecore.contract._session import (
    SA_AGENT_ID,
    SA_SESSION_ID,
    SA_STATUS,
    SA_TURN,
    SEARCH_ATTRIBUTES,
    TURN_SEARCH_ATTRIBUTE_EVERY,
)
from tests.temporal.conftest import Env


def _upserts(history: Any) -> list[dict[str, int | str]]:
    """statecore's search attributes each upsert event of a history set. The SDK's own
    upsert of TemporalChangeVersion (once per run, with the first turn that skips its
    upsert: the patch that made turns sparse) is left out."""
    found = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            continue
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
        ours = {
            name: json.loads(payload.data)
            for name, payload in fields.indexed_fields.items()
            if name in SEARCH_ATTRIBUTES
        }
        if ours:
            found.append(ours)
    return found


async def _listed(env: Env, query: str) -> list[str]:
    return [w.id async for w in env.client.list_workflows(query)]


async def test_search_attributes_are_upserted_only_when_they_change(env: Env) -> None:
    sessions = env.sessions
    await sessions.send(env.agent, "sa", "one", turn_id="s1")
    await sessions.send(env.agent, "sa", "one", turn_id="s1")  # duplicate: nothing changes
    await sessions.describe(env.agent, "sa")  # a query: no history at all
    await sessions.pause(env.agent, "sa", "look")
    await sessions.pause(env.agent, "sa", "look again")  # already paused: no new upsert
    await sessions.resume(env.agent, "sa")
    await sessions.send(env.agent, "sa", "two", turn_id="s2")
    handle = sessions.handle(env.agent, "sa")
    upserts = _upserts(await handle.fetch_history())
    # Start (ids, status, turn 0) + the first turn + paused + active; turn 2 alone writes
    # nothing (StatecoreTurn moves every TURN_SEARCH_ATTRIBUTE_EVERY turns).
    assert upserts == [
        {
            SA_SESSION_ID: "sa",
            SA_AGENT_ID: env.agent,
            SA_STATUS: "active",
            SA_TURN: 0,
        },
        {SA_TURN: 1},
        {SA_STATUS: "paused"},
        {SA_STATUS: "active"},
    ]
    active = f"StatecoreAgentId = '{env.agent}' AND StatecoreStatus = 'active'"
    assert await _listed(env, f"{active} AND StatecoreTurn = 1") == [handle.id]
    # The exact turn is in the describe query and the current details.
    assert (await sessions.describe(env.agent, "sa")).checkpoint.turn == 2
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert "turn 2 -" in meta.current_details


async def test_the_turn_attribute_moves_every_n_turns_and_exactly_with_a_status_change(
    env: Env,
) -> None:
    sessions = env.sessions
    every = TURN_SEARCH_ATTRIBUTE_EVERY
    for n in range(1, every + 2):
        await sessions.send(env.agent, "sn", f"message {n}", turn_id=f"n{n}")
    handle = sessions.handle(env.agent, "sn")
    assert [u[SA_TURN] for u in _upserts(await handle.fetch_history()) if SA_TURN in u] == [
        0,
        1,
        every,
    ]
    assert await _listed(env, f"StatecoreAgentId = '{env.agent}' AND StatecoreTurn = {every}") == [
        handle.id
    ]
    # A status change carries the exact turn with it.
    await sessions.pause(env.agent, "sn", "look")
    assert (await sessions.describe(env.agent, "sn")).checkpoint.status == "paused"
    assert _upserts(await handle.fetch_history())[-1] == {
        SA_STATUS: "paused",
        SA_TURN: every + 1,
    }
    query = f"StatecoreAgentId = '{env.agent}' AND StatecoreTurn = {every + 1}"
    assert await _listed(env, query) == [handle.id]


async def test_current_details_show_turn_status_tokens_and_last_operation(env: Env) -> None:
    await env.sessions.send(env.agent, "cd", "hello", turn_id="d1")
    await env.sessions.pause(env.agent, "cd", "budget review")
    handle = env.sessions.handle(env.agent, "cd")
    report = await env.sessions.describe(env.agent, "cd")
    assert report.checkpoint.status == "paused"
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    details = meta.current_details
    assert "paused" in details
    assert "turn 1" in details
    assert f"{report.checkpoint.token_total} tokens" in details
    assert "budget review" in details


async def test_summarize_compaction_runs_by_itself_past_the_threshold(env: Env) -> None:
    profile = {"max_tokens": 600, "summarization_threshold": 200}
    for i in range(8):
        await env.sessions.send(
            env.agent, "auto", f"fact {i}: " + "detail " * 25, turn_id=f"a{i}", profile=profile
        )
    report = await env.sessions.describe(env.agent, "auto", include_data=True)
    assert report.checkpoint.compactions >= 1
    conversation = report.store("conversation")
    assert conversation.items == 16  # the log is intact
    assert conversation.metadata["has_summary"] is True
    assert conversation.metadata["window_start_seq"] > 1
    last = await env.sessions.send(
        env.agent, "auto", "what do you know?", turn_id="a-last", profile=profile
    )
    assert "summary: yes" in last.reply.content
    assert last.context_tokens <= 600


class _NoSummaries:
    """A model that chats but refuses to summarize (the LLM is the one part tests fake)."""

    name = "no-summaries"

    def __init__(self) -> None:
        from statecore.llm import OfflineModel

        self._inner = OfflineModel()

    async def complete(self, request):  # type: ignore[no-untyped-def]
        from statecore.core._errors import ModelError

        if request.purpose == "summarize":
            raise ModelError("summaries are switched off on this endpoint")
        return await self._inner.complete(request)


async def test_a_failed_auto_summary_is_recorded_and_never_fails_the_turn(dev_server) -> None:
    from tests.dbs import fresh_database
    from tests.temporal.conftest import running_env

    profile = {"max_tokens": 600, "summarization_threshold": 200}
    async with (
        fresh_database("sqlite", "nosum") as url,
        running_env(dev_server, url, models={"default": _NoSummaries()}) as env,
    ):
        for i in range(6):
            result = await env.sessions.send(
                env.agent, "ns", f"fact {i}: " + "detail " * 25, turn_id=f"n{i}", profile=profile
            )
            assert result.turn == i + 1
        report = await env.sessions.describe(env.agent, "ns")
        assert report.checkpoint.message_count == 12
        failed = [r for r in report.rejections if r.operation == "auto_compact"]
        assert failed and failed[-1].code == "ModelError"
        assert report.checkpoint.status == "active"
