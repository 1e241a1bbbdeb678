"""What operators see without touching SQL: search attributes, current details, auto-summary."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata

from tests.temporal.conftest import Env


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
    history = await handle.fetch_history()
    upserts = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    # Start (ids, status, turn 0) + turn 1 + paused + active + turn 2.
    assert len(upserts) == 5
    found = [
        w
        async for w in env.client.list_workflows(
            f"StatecoreAgentId = '{env.agent}' AND StatecoreStatus = 'active' AND StatecoreTurn = 2"
        )
    ]
    assert [w.id for w in found] == [handle.id]


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
        from statecore.core.errors import ModelError

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
