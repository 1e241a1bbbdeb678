"""Compaction policies: requests, plans, the extractive summarizer and the auto-summarize rule."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conversation_log import REF, LogBuilder, assistant, call, result, user
from store_backends import BACKENDS, open_backend

from statecore.core._errors import (
    ConflictError,
    InvalidInputError,
    InvalidLimitError,
    ModelError,
    ModelUnavailableError,
    SessionNotFoundError,
    UnknownStrategyError,
)
from statecore.core._profile import SessionProfile
from statecore.core._tokens import TokenCounter
from statecore.operations._compaction import (
    DEFAULT_KEEP_MESSAGES,
    CompactionRequest,
    ExtractiveSummarizer,
    Summarizer,
    apply_compaction,
    commit_compaction,
    compact_session,
    plan_compaction,
    prepare_compaction,
    should_auto_summarize,
)
from statecore.store._base import StateStore

COUNTER = TokenCounter()


def chat(turns: int) -> LogBuilder:
    log = LogBuilder(COUNTER)
    for i in range(turns):
        log.add(user(f"question {i}. more words here"), assistant(f"answer {i}. and details"))
    return log


# --- requests ----------------------------------------------------------------------------------


def test_empty_request_is_tokens_with_profile_defaults() -> None:
    for raw in ({}, None):
        req = CompactionRequest.parse(raw)
        assert (req.strategy, req.max_tokens, req.max_messages) == ("tokens", None, None)


@pytest.mark.parametrize(
    "raw",
    [
        {"max_tokens": 0},
        {"max_tokens": -10},
        {"max_tokens": 10**12},
        {"max_messages": 0},
        {"max_messages": 10**9},
        {"max_messages": True},
        {"max_tokens": 1.5},
        {"max_tokens": "100"},
    ],
)
def test_bad_limits_raise_invalid_limit(raw: dict) -> None:
    with pytest.raises(InvalidLimitError):
        CompactionRequest.parse(raw)


@pytest.mark.parametrize("strategy", ["everything", "", None, 3, "Recent"])
def test_unknown_strategy_is_typed(strategy: object) -> None:
    with pytest.raises(UnknownStrategyError):
        CompactionRequest.parse({"strategy": strategy})


@pytest.mark.parametrize("raw", [{"stratgy": "recent"}, ["recent"], "recent", 5])
def test_malformed_requests_become_invalid_input(raw: object) -> None:
    with pytest.raises(InvalidInputError):
        CompactionRequest.parse(raw)


# --- plans -------------------------------------------------------------------------------------


def test_recent_keeps_the_last_n_messages() -> None:
    log = chat(10)  # seqs 1..20
    plan = plan_compaction(
        CompactionRequest(strategy="recent", max_messages=5),
        session=log.session(),
        tail=log.window(),
    )
    assert (plan.window_start_before, plan.window_start) == (1, 16)
    assert (plan.messages_before, plan.messages_after) == (20, 5)
    assert plan.tokens_after == sum(m.tokens for m in log.messages[15:])
    assert plan.changed and plan.summarize_from_seq is None


def test_recent_default_keeps_fifty() -> None:
    log = chat(40)
    plan = plan_compaction(
        CompactionRequest(strategy="recent"), session=log.session(), tail=log.window()
    )
    assert plan.messages_after == DEFAULT_KEEP_MESSAGES
    assert plan.window_start == 80 - DEFAULT_KEEP_MESSAGES + 1


def test_tokens_budget_edge() -> None:
    log = chat(6)
    last_four = sum(m.tokens for m in log.messages[-4:])
    exact = plan_compaction(
        CompactionRequest(max_tokens=last_four), session=log.session(), tail=log.window()
    )
    assert (exact.window_start, exact.tokens_after) == (9, last_four)
    short = plan_compaction(
        CompactionRequest(max_tokens=last_four - 1), session=log.session(), tail=log.window()
    )
    assert short.window_start == 10 and short.tokens_after < last_four


def test_tokens_within_limit_changes_nothing() -> None:
    log = chat(3)
    plan = plan_compaction(CompactionRequest(), session=log.session(), tail=log.window())
    assert not plan.changed and plan.window_start == 1
    assert plan.tokens_after == plan.tokens_before == sum(m.tokens for m in log.messages)


def test_boundary_never_splits_a_tool_exchange() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("q1"), assistant("a1"))
    log.add(user("weather?"), call("a", "b"), result("a"), result("b"), assistant("sunny"))
    # Keeping 3 messages would start at result "b" (seq 6): the boundary moves past the
    # whole exchange instead, keeping fewer messages rather than an orphan result.
    plan = plan_compaction(
        CompactionRequest(strategy="recent", max_messages=3),
        session=log.session(),
        tail=log.window(),
    )
    assert plan.window_start == 7 and plan.messages_after == 1
    plan = plan_compaction(
        CompactionRequest(strategy="recent", max_messages=4),
        session=log.session(),
        tail=log.window(),
    )
    assert plan.window_start == 4 and plan.messages_after == 4


def test_an_open_call_is_never_passed() -> None:
    log = chat(3)
    log.add(user("look it up"), call("pending"))
    plan = plan_compaction(
        CompactionRequest(strategy="tokens", max_tokens=1), session=log.session(), tail=log.window()
    )
    assert plan.window_start == log.messages[-1].seq
    assert plan.messages_after == 1


def test_keeping_nothing_moves_past_the_last_message() -> None:
    log = chat(2)
    plan = plan_compaction(
        CompactionRequest(max_tokens=1), session=log.session(), tail=log.window()
    )
    assert plan.window_start == 5 and plan.messages_after == plan.tokens_after == 0


def test_summarize_waits_for_the_threshold_then_folds_to_half() -> None:
    log = chat(10)
    total = sum(m.tokens for m in log.messages)
    below = plan_compaction(
        CompactionRequest(strategy="summarize", max_tokens=total),
        session=log.session(),
        tail=log.window(),
    )
    assert not below.changed and below.summarize_from_seq is None
    assert "threshold" in below.reason

    plan = plan_compaction(
        CompactionRequest(strategy="summarize", max_tokens=total - 1),
        session=log.session(),
        tail=log.window(),
    )
    assert plan.changed
    assert plan.tokens_after <= (total - 1) // 2
    assert (plan.summarize_from_seq, plan.summarize_to_seq) == (1, plan.window_start - 1)
    # The profile's threshold is the default trigger.
    profile = SessionProfile(max_tokens=total, summarization_threshold=total - 1)
    by_profile = plan_compaction(
        CompactionRequest(strategy="summarize"),
        session=log.session(),
        tail=log.window(),
        profile=profile,
    )
    assert by_profile.window_start == plan.window_start


def test_summarize_range_starts_at_the_current_window_start() -> None:
    log = chat(10)
    plan = plan_compaction(
        CompactionRequest(strategy="summarize", max_tokens=40),
        session=log.session(window_start_seq=7),
        tail=log.window(7),
    )
    assert plan.summarize_from_seq == 7 == plan.window_start_before
    assert plan.summarize_to_seq == plan.window_start - 1


def test_plans_reject_a_tail_outside_the_window() -> None:
    log = chat(3)
    with pytest.raises(InvalidInputError, match="window start"):
        plan_compaction(CompactionRequest(), session=log.session(3), tail=log.window(1))
    with pytest.raises(InvalidInputError, match="ascending"):
        plan_compaction(CompactionRequest(), session=log.session(), tail=log.window()[::-1])


def test_empty_window_is_a_no_op() -> None:
    log = chat(2)
    plan = plan_compaction(
        CompactionRequest(max_tokens=1), session=log.session(window_start_seq=5), tail=[]
    )
    assert not plan.changed and plan.window_start == 5 and plan.messages_before == 0


def test_should_auto_summarize_passes_the_threshold() -> None:
    profile = SessionProfile(max_tokens=4096, summarization_threshold=3000)
    assert not should_auto_summarize(profile, 3000)
    assert should_auto_summarize(profile, 3001)
    assert not should_auto_summarize(SessionProfile(), 0)
    with pytest.raises(InvalidInputError):
        should_auto_summarize(profile, -1)


# --- extractive summarizer ---------------------------------------------------------------------


def summarize(summarizer: ExtractiveSummarizer, previous: str | None, log: LogBuilder) -> str:
    return asyncio.run(summarizer.summarize(previous, log.messages))


def test_extractive_summary_lines() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("Plan a trip to Rome. I have five days."), call("x", name="search_flights"))
    log.add(result("x", "FLIGHT AZ123 ..."), assistant("Found a flight!  It leaves at 9."))
    s = ExtractiveSummarizer(COUNTER)
    assert isinstance(s, Summarizer)
    text = summarize(s, "- user: Hello.\n\n- assistant: Hi.", log)
    assert text.splitlines() == [
        "- user: Hello.",
        "- assistant: Hi.",
        "- user: Plan a trip to Rome.",
        "- assistant called search_flights",
        "- assistant: Found a flight!",
    ]
    assert "FLIGHT" not in text  # tool output is not summarized
    assert summarize(s, "- user: Hello.\n\n- assistant: Hi.", log) == text  # deterministic


def test_extractive_summary_stays_within_its_cap_and_keeps_the_opening_line() -> None:
    log = LogBuilder(COUNTER)
    for i in range(200):
        log.add(user(f"Point number {i} is important. Filler text follows."))
    s = ExtractiveSummarizer(COUNTER, max_tokens=100, max_line_chars=60)
    text = summarize(s, "- user: The task is to plan a trip.", log)
    assert COUNTER.count_text(text) <= 100
    lines = text.splitlines()
    assert lines[0] == "- user: The task is to plan a trip."
    assert lines[-1] == "- user: Point number 199 is important."
    assert all(len(line) <= 60 for line in lines)


def test_extractive_summary_clips_long_sentences_and_handles_tool_only_ranges() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("word " * 500))
    s = ExtractiveSummarizer(COUNTER, max_tokens=16, max_line_chars=400)
    text = summarize(s, None, log)
    assert COUNTER.count_text(text) <= 16 and text.endswith("…")
    only_tools = LogBuilder(COUNTER)
    only_tools.add(result("orphan", "x"), result("orphan2", "y"))
    assert summarize(ExtractiveSummarizer(COUNTER), None, only_tools) == (
        "- 2 earlier messages held no conversational text"
    )


def test_extractive_summarizer_limits_are_validated() -> None:
    with pytest.raises(InvalidLimitError):
        ExtractiveSummarizer(COUNTER, max_tokens=8)
    with pytest.raises(InvalidLimitError):
        ExtractiveSummarizer(COUNTER, max_line_chars=0)


# --- applying compaction through the storage contract ------------------------------------------


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    async with open_backend(request.param, tmp_path) as backend:
        yield backend


class RecordingSummarizer:
    """Stands in for the model: records what it was asked to fold."""

    def __init__(self, reply: str = "- folded") -> None:
        self.reply = reply
        self.calls: list[tuple[str | None, list[int]]] = []

    async def summarize(self, previous_summary, messages) -> str:
        self.calls.append((previous_summary, [m.seq for m in messages]))
        return self.reply


class FailingSummarizer:
    async def summarize(self, previous_summary, messages) -> str:
        raise ModelUnavailableError("model endpoint is down")


async def seed(store: StateStore, turns: int) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        for i in range(turns):
            messages = [user(f"Question {i}. Details follow."), assistant(f"Answer {i}. More.")]
            if i % 3 == 1:
                messages[1:1] = [call(f"c{i}"), result(f"c{i}", "tool output")]
            await tx.conversation.append(REF, f"t{i}", messages)


async def snapshot(store: StateStore) -> tuple:
    async with store.transaction() as tx:
        info = await tx.sessions.get(REF)
        return (
            await tx.conversation.messages(REF),
            await tx.conversation.summary(REF),
            info.window_start_seq if info else None,
        )


async def test_tokens_compaction_moves_the_start_and_keeps_the_log(store: StateStore) -> None:
    await seed(store, 12)
    log, _, _ = await snapshot(store)
    async with store.transaction() as tx:
        outcome = await apply_compaction(tx, REF, CompactionRequest(max_tokens=60), counter=COUNTER)
    after_log, summary, start = await snapshot(store)
    assert after_log == log  # compaction never deletes or rewrites a message
    assert summary is None and outcome.summary_through_seq is None
    assert outcome.changed and start == outcome.window_start > 1
    assert outcome.tokens_after <= 60 < outcome.tokens_before
    assert outcome.messages_before == len(log)
    assert outcome.messages_after == len(log) - start + 1
    assert log[start - 1].role != "tool"  # the new start is not inside a tool exchange
    async with store.transaction() as tx:
        assert (await tx.conversation.tail(REF))[0].seq == start
        again = await apply_compaction(tx, REF, CompactionRequest(max_tokens=60), counter=COUNTER)
    assert not again.changed and again.window_start == start


async def test_summarize_folds_the_oldest_part_into_the_summary(store: StateStore) -> None:
    await seed(store, 12)
    log, _, _ = await snapshot(store)
    request = CompactionRequest(strategy="summarize", max_tokens=120)
    async with store.transaction() as tx:
        outcome = await apply_compaction(tx, REF, request, counter=COUNTER)
    after_log, summary, start = await snapshot(store)
    assert after_log == log
    assert summary is not None and outcome.summary_through_seq == summary.through_seq == start - 1
    assert outcome.summarized_messages == start - 1
    assert "- user: Question 0." in summary.text and "tool output" not in summary.text
    assert outcome.tokens_after <= 60

    # The next fold gets the previous summary and only the messages after it.
    await seed_more(store, 12, 20)
    model = RecordingSummarizer("- user: Question 0.\n- later")
    async with store.transaction() as tx:
        second = await apply_compaction(tx, REF, request, summarizer=model, counter=COUNTER)
    assert model.calls == [(summary.text, list(range(start, second.window_start)))]
    _, summary2, start2 = await snapshot(store)
    assert summary2.text == "- user: Question 0.\n- later"
    assert summary2.through_seq == start2 - 1 == second.window_start - 1


async def seed_more(store: StateStore, first: int, last: int) -> None:
    async with store.transaction() as tx:
        for i in range(first, last):
            await tx.conversation.append(REF, f"t{i}", [user(f"Question {i}."), assistant("Ok.")])


async def test_summarize_below_the_threshold_does_not_call_the_model(store: StateStore) -> None:
    await seed(store, 2)
    model = RecordingSummarizer()
    before = await snapshot(store)
    async with store.transaction() as tx:
        outcome = await apply_compaction(
            tx, REF, CompactionRequest(strategy="summarize"), summarizer=model, counter=COUNTER
        )
    assert not outcome.changed and model.calls == []
    assert await snapshot(store) == before


@pytest.mark.parametrize("summarizer", [FailingSummarizer(), RecordingSummarizer("   ")])
async def test_a_failing_summarizer_leaves_everything_unchanged(
    store: StateStore, summarizer: object
) -> None:
    await seed(store, 12)
    before = await snapshot(store)
    request = CompactionRequest(strategy="summarize", max_tokens=100)
    with pytest.raises(ModelError):
        async with store.transaction() as tx:
            await apply_compaction(tx, REF, request, summarizer=summarizer, counter=COUNTER)
    with pytest.raises(ModelError):
        await compact_session(store, REF, request, summarizer=summarizer, counter=COUNTER)
    assert await snapshot(store) == before


async def test_summarizing_again_right_away_changes_nothing(store: StateStore) -> None:
    await seed(store, 12)
    request = CompactionRequest(strategy="summarize", max_messages=10)
    async with store.transaction() as tx:
        first = await apply_compaction(tx, REF, request, counter=COUNTER)
    after_first = await snapshot(store)
    async with store.transaction() as tx:
        second = await apply_compaction(tx, REF, request, counter=COUNTER)
    assert first.changed and first.messages_after <= 5
    assert not second.changed and second.summary_through_seq is None
    assert second.window_start == first.window_start
    assert await snapshot(store) == after_first


async def test_compact_session_commits_in_a_second_transaction(store: StateStore) -> None:
    await seed(store, 12)
    log, _, _ = await snapshot(store)
    request = CompactionRequest(strategy="summarize", max_tokens=100)
    outcome = await compact_session(store, REF, request, counter=COUNTER)
    after_log, summary, start = await snapshot(store)
    assert after_log == log and outcome.changed and start == outcome.window_start
    assert summary is not None and summary.through_seq == start - 1


async def test_a_stale_prepared_compaction_is_refused(store: StateStore) -> None:
    await seed(store, 12)
    async with store.transaction() as tx:
        prepared = await prepare_compaction(tx, REF, CompactionRequest(max_tokens=50))
    async with store.transaction() as tx:
        await apply_compaction(tx, REF, CompactionRequest(max_tokens=80), counter=COUNTER)
    before = await snapshot(store)
    with pytest.raises(ConflictError):
        async with store.transaction() as tx:
            await commit_compaction(tx, REF, prepared, None)
    assert await snapshot(store) == before


async def test_compacting_a_missing_session_is_typed(store: StateStore) -> None:
    with pytest.raises(SessionNotFoundError):
        async with store.transaction() as tx:
            await apply_compaction(tx, REF, CompactionRequest(), counter=COUNTER)
    async with store.transaction() as tx:
        assert await tx.sessions.get(REF) is None


def test_policies_import_no_tokenizer_or_database() -> None:
    # Workflow code may import the policies (requests, should_auto_summarize); the Temporal
    # sandbox must not pull tiktoken or SQLAlchemy in through them.
    probe = (
        "import sys, statecore.operations._compaction, statecore.operations._context_window; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'tiktoken', 'sqlalchemy'}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_summarize_never_empties_the_window() -> None:
    # A budget smaller than the newest turn: the summary could not meet it either, so the
    # newest question and its answer stay beside the summary.
    log = chat(4)
    plan = plan_compaction(
        CompactionRequest(strategy="summarize", max_tokens=2),
        session=log.session(),
        tail=log.window(),
    )
    assert plan.changed and plan.messages_after == 2
    assert plan.window_start == log.messages[-2].seq
    assert [m.role for m in log.messages[-2:]] == ["user", "assistant"]
