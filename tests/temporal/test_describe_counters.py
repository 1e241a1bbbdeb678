"""A session report's counters agree with each other and with the database: the describe
query (answered from the workflow) against describe_state, which reads SQL through the same
function as the database view (``statecore describe --db``)."""

from __future__ import annotations

from statecore.contract._session import SessionReport
from tests.temporal.conftest import Env


async def _turns(env: Env, session: str, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        await env.sessions.send(
            env.agent, session, f"question {i} " + "words " * 20, turn_id=f"t{i}"
        )


async def test_the_query_never_returns_data_from_an_earlier_describe_data(env: Env) -> None:
    await _turns(env, "stale", 2)
    with_data = await env.sessions.describe(env.agent, "stale", include_data=True)
    assert len(with_data.store("conversation").data["messages"]) == 4  # type: ignore[index]
    await _turns(env, "stale", 1, start=2)
    report = await env.sessions.describe(env.agent, "stale")
    assert all(store.data is None for store in report.stores)
    conversation = report.store("conversation")
    assert not any(key.startswith("data_") for key in conversation.metadata)
    assert conversation.items == 6
    assert conversation.metadata["window_messages"] == 6
    assert conversation.metadata["turn_records"] == 3  # the cached count follows the turn


async def test_query_and_sql_reports_agree_on_every_counter(env: Env) -> None:
    await _turns(env, "agree", 3)
    await env.sessions.describe(env.agent, "agree", include_data=True)  # fills the cache
    await _turns(env, "agree", 2, start=3)
    await env.sessions.send(env.agent, "agree", "question 0", turn_id="t0")  # a duplicate
    query: SessionReport = await env.sessions.describe(env.agent, "agree")
    fresh: SessionReport = await env.sessions.describe(env.agent, "agree", include_data=True)
    for report in (query, fresh):
        conversation = report.store("conversation")
        # Ten messages of five turns; the latest-turn marker is not a turn record.
        assert (conversation.items, conversation.metadata["turn_records"]) == (10, 5)
        assert conversation.metadata["window_messages"] == 10
    assert query.store("orchestration").tokens == fresh.store("orchestration").tokens > 0
    assert query.store("orchestration").items == fresh.store("orchestration").items == 1
    assert query.checkpoint.usage.total_tokens == fresh.store("orchestration").tokens


async def test_a_compaction_that_changes_nothing_reports_nothing_compacted(env: Env) -> None:
    await _turns(env, "noop", 2)
    report = await env.sessions.compact(env.agent, "noop", strategy="recent", max_messages=50)
    assert report.compacted == []
    assert report.checkpoint.compactions == 0
    assert report.checkpoint.last_operation == "compaction changed nothing (recent, update)"
    moved = await env.sessions.compact(env.agent, "noop", strategy="recent", max_messages=2)
    assert moved.compacted == ["conversation"] and moved.checkpoint.compactions == 1


async def test_summarize_below_the_summary_size_keeps_the_newest_exchange(env: Env) -> None:
    await _turns(env, "tight", 4)
    report = await env.sessions.compact(env.agent, "tight", strategy="summarize", max_tokens=60)
    assert report.compacted == ["conversation"]
    after = report.store("conversation").metadata  # the store as the compaction left it
    assert after["has_summary"] is True
    assert after["window_messages"] == 2  # the newest question and its answer stay
    reply = await env.sessions.send(env.agent, "tight", "and now?", turn_id="t9")
    assert reply.turn == 5
