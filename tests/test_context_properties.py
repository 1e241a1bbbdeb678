"""Properties of context assembly and compaction over random conversations and budgets.

Conversations mix user and assistant messages of random lengths, assistant tool calls followed
by their results (sometimes one result missing), and stray tool results. The checks:
the context never exceeds its budget, tool exchanges are never split, the newest messages are
the ones kept; compaction never changes the log, only moves the window start forward, never
splits an exchange and is idempotent.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from conversation_log import REF, LogBuilder, assistant, call, result, user
from hypothesis import example, given, settings
from hypothesis import strategies as st
from store_backends import BACKENDS, open_backend

from statecore.core._errors import ContextBudgetError
from statecore.core._models import Message, SessionRef, StoredMessage
from statecore.core._tokens import TokenCounter
from statecore.operations._compaction import CompactionRequest, apply_compaction, plan_compaction
from statecore.operations._context_window import (
    HINTS_LABEL,
    SUMMARY_LABEL,
    build_context,
    group_exchanges,
)
from statecore.store._base import StateStore

COUNTER = TokenCounter()
PURE = settings(max_examples=60, deadline=None)
STORED = settings(max_examples=20, deadline=None)

# --- random conversations ----------------------------------------------------------------------

_lengths = st.integers(min_value=1, max_value=60)
_segment = st.one_of(
    st.tuples(st.just("user"), _lengths),
    st.tuples(st.just("assistant"), _lengths),
    # (kind, number of calls, result length, drop the last result when 0)
    st.tuples(st.just("tools"), st.integers(1, 3), _lengths, st.integers(0, 4)),
    st.tuples(st.just("orphan"), _lengths),
)
conversations = st.lists(_segment, max_size=20)


def text(n: int, seed: int) -> str:
    return " ".join(f"w{(seed * 7 + i) % 97}" for i in range(n))


def turns_of(segments: list[tuple]) -> list[list[Message]]:
    """One list of messages per segment (a segment is stored as one turn)."""
    ids = itertools.count()
    turns: list[list[Message]] = []
    for pos, seg in enumerate(segments):
        kind = seg[0]
        if kind == "user":
            turns.append([user(text(seg[1], pos))])
        elif kind == "assistant":
            turns.append([assistant(text(seg[1], pos))])
        elif kind == "orphan":
            turns.append([result(f"gone{next(ids)}", text(seg[1], pos))])
        else:
            _, calls, length, keep = seg
            call_ids = [f"c{next(ids)}" for _ in range(calls)]
            answered = call_ids if keep else call_ids[:-1]
            turns.append([call(*call_ids), *(result(i, text(length, pos)) for i in answered)])
    return turns


def stored_log(segments: list[tuple]) -> LogBuilder:
    log = LogBuilder(COUNTER)
    for turn in turns_of(segments):
        log.add(*turn)
    return log


# --- invariants --------------------------------------------------------------------------------


def assert_tool_exchanges_whole(messages: list[Message]) -> None:
    """Every tool call is followed by exactly its results; every result follows its call."""
    i = 0
    while i < len(messages):
        msg = messages[i]
        assert msg.role != "tool", f"tool result at {i} without its call"
        if msg.tool_calls:
            # Parallel calls may be stored one per message (Responses-API items): the calls
            # in a row, then all their results.
            j = i
            ids: list[str] = []
            while j < len(messages) and messages[j].role == "assistant" and messages[j].tool_calls:
                ids += [c.id for c in messages[j].tool_calls]
                j += 1
            results = messages[j : j + len(ids)]
            assert all(r.role == "tool" for r in results), "a call is missing results"
            assert sorted(r.tool_call_id or "" for r in results) == sorted(ids)
            i = j + len(ids)
        else:
            i += 1


def head_messages(prompt: str | None, summary: str | None, hints: list[str]) -> list[Message]:
    out = []
    if prompt:
        out.append(Message(role="system", content=prompt))
    if summary:
        out.append(Message(role="system", content=f"{SUMMARY_LABEL}\n{summary}"))
    if hints:
        lines = "\n".join(f"- {h}" for h in hints)
        out.append(Message(role="system", content=f"{HINTS_LABEL}\n{lines}"))
    return out


@PURE
@given(
    segments=conversations,
    budget=st.integers(min_value=1, max_value=1200),
    cut=st.integers(min_value=0, max_value=4),
    prompt=st.sampled_from([None, "You are terse.", "You are a careful assistant. " * 8]),
    summary=st.sampled_from([None, "Earlier: the user asked about trains."]),
    hints=st.lists(st.sampled_from(["Prefers Python", "Uses PostgreSQL"]), max_size=2),
    answer_open_call=st.booleans(),
)
# Two calls in a row, both answered by the new messages: one exchange of parallel calls.
@example(
    segments=[("tools", 1, 1, 0), ("tools", 1, 1, 0)],
    budget=41,
    cut=0,
    prompt=None,
    summary=None,
    hints=[],
    answer_open_call=True,
)
def test_context_fits_keeps_exchanges_and_prefers_the_newest(
    segments, budget, cut, prompt, summary, hints, answer_open_call
) -> None:
    check_context(segments, budget, cut, prompt, summary, hints, answer_open_call)


# Without tool calls or results, build_context picks the window without grouping it: the
# same checks, over conversations of plain messages only.
@PURE
@given(
    segments=st.lists(
        st.one_of(st.tuples(st.just("user"), _lengths), st.tuples(st.just("assistant"), _lengths)),
        max_size=30,
    ),
    budget=st.integers(min_value=1, max_value=1200),
    cut=st.integers(min_value=0, max_value=4),
    prompt=st.sampled_from([None, "You are terse."]),
)
def test_a_window_of_plain_messages_keeps_the_newest_that_fit(segments, budget, cut, prompt):
    check_context(segments, budget, cut, prompt, None, [], False)


def check_context(segments, budget, cut, prompt, summary, hints, answer_open_call) -> None:
    """build_context's window is the newest run of whole, complete exchanges that fits."""
    window = stored_log(segments).messages[cut:]  # a window start may cut an exchange
    exchanges = group_exchanges(window)
    pinned = None
    new: list[Message] = [user("and now?")]
    if answer_open_call and exchanges and exchanges[-1].status == "open":
        pinned = exchanges.pop()
        new = [result(i) for i in sorted(pinned.pending_call_ids)]
    mandatory = COUNTER.count_messages([*head_messages(prompt, summary, hints), *new])
    mandatory += pinned.tokens if pinned else 0

    try:
        ctx = build_context(
            system_prompt=prompt,
            summary=summary,
            hints=hints,
            window=window,
            new_messages=new,
            max_tokens=budget,
            counter=COUNTER,
        )
    except ContextBudgetError:
        assert mandatory > budget
        return
    assert mandatory <= budget
    assert ctx.tokens <= budget
    assert ctx.tokens == COUNTER.count_messages(ctx.messages)
    assert_tool_exchanges_whole(ctx.messages)

    # The window part is a run of whole exchanges ending at the newest usable one; the next
    # older complete exchange did not fit what was left.
    usable = [ex for ex in exchanges if ex.status == "complete"]
    kept = [ex for ex in usable if ctx.window_from_seq and ex.first_seq >= ctx.window_from_seq]
    kept_msgs = [m for ex in [*kept, *([pinned] if pinned else [])] for m in ex.messages]
    head = len(ctx.messages) - len(kept_msgs) - len(new)
    assert [(m.role, m.content) for m in ctx.messages[head : head + len(kept_msgs)]] == [
        (m.role, m.content) for m in kept_msgs
    ]
    assert ctx.window_messages == len(kept_msgs)
    assert ctx.dropped == len(window) - len(kept_msgs)
    older = [ex for ex in usable if ex not in kept]
    if kept:
        assert kept == usable[len(usable) - len(kept) :], "kept exchanges are the newest ones"
    if older:
        assert older[-1].tokens > budget - ctx.tokens


# --- compaction plans --------------------------------------------------------------------------

requests = st.builds(
    CompactionRequest,
    strategy=st.sampled_from(["recent", "tokens", "summarize"]),
    max_tokens=st.one_of(st.none(), st.integers(1, 800)),
    max_messages=st.one_of(st.none(), st.integers(1, 30)),
)


def window_of(log: LogBuilder, start: int) -> list[StoredMessage]:
    return log.window(start)


@PURE
@given(segments=conversations, request=requests, start_offset=st.integers(0, 6))
def test_plans_move_forward_on_exchange_boundaries_and_are_idempotent(
    segments, request, start_offset
) -> None:
    log = stored_log(segments)
    last = len(log.messages)
    start = min(1 + start_offset, last + 1)
    tail = window_of(log, start)
    plan = plan_compaction(request, session=log.session(start), tail=tail)

    assert start <= plan.window_start <= last + 1
    exchanges = group_exchanges(tail)
    boundaries = {ex.first_seq for ex in exchanges} | {start, last + 1}
    assert plan.window_start in boundaries, "the new start splits a tool exchange"
    if exchanges and exchanges[-1].status == "open":
        assert plan.window_start <= exchanges[-1].first_seq, "an open call was passed"
    kept = [m for m in tail if m.seq >= plan.window_start]
    assert plan.messages_after == len(kept)
    assert plan.tokens_after == sum(m.tokens for m in kept)
    if request.strategy == "summarize" and plan.changed:
        assert (plan.summarize_from_seq, plan.summarize_to_seq) == (start, plan.window_start - 1)
    else:
        assert plan.summarize_from_seq is None

    again = plan_compaction(
        request, session=log.session(plan.window_start), tail=window_of(log, plan.window_start)
    )
    assert again.window_start == plan.window_start and not again.changed


# --- compaction through real stores ------------------------------------------------------------


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:
        yield loop_runner


@pytest.fixture(
    scope="module", params=[*BACKENDS, pytest.param("postgres", marks=pytest.mark.postgres)]
)
def backend(
    request: pytest.FixtureRequest, runner: asyncio.Runner, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StateStore]:
    directory: Path = tmp_path_factory.mktemp("compaction")
    opened = open_backend(request.param, directory)
    store = runner.run(opened.__aenter__())
    yield store
    runner.run(opened.__aexit__(None, None, None))


_session_ids = itertools.count()


async def _read_all(store: StateStore, ref: SessionRef) -> tuple[list[StoredMessage], int]:
    async with store.transaction() as tx:
        info = await tx.sessions.get(ref)
        assert info is not None
        return await tx.conversation.messages(ref), info.window_start_seq


async def _compaction_round(store: StateStore, segments: list[tuple], request) -> None:
    ref = REF.model_copy(update={"session_id": f"prop{next(_session_ids)}"})
    async with store.transaction() as tx:
        await tx.sessions.ensure(ref)
        for n, turn in enumerate(turns_of(segments)):
            await tx.conversation.append(ref, f"t{n}", turn)
    log, start = await _read_all(store, ref)
    assert start == 1

    async with store.transaction() as tx:
        first = await apply_compaction(tx, ref, request, counter=COUNTER)
    log_after, start_after = await _read_all(store, ref)
    assert log_after == log, "compaction changed the log"
    assert start_after == first.window_start >= start
    starts = {ex.first_seq for ex in group_exchanges(log)} | {1, len(log) + 1}
    assert start_after in starts, "the new start splits a tool exchange"
    if first.summary_through_seq is not None:
        assert first.summary_through_seq == start_after - 1

    async with store.transaction() as tx:
        second = await apply_compaction(tx, ref, request, counter=COUNTER)
    assert not second.changed and second.summary_through_seq is None
    assert await _read_all(store, ref) == (log, start_after)


@STORED
@given(segments=conversations, request=requests)
def test_compaction_keeps_the_log_and_is_idempotent(
    runner: asyncio.Runner, backend: StateStore, segments, request
) -> None:
    runner.run(_compaction_round(backend, segments, request))


@pytest.mark.parametrize("spare", [0, -1])
def test_a_plain_message_that_fits_exactly_is_kept(spare: int) -> None:
    window = stored_log([("user", 5), ("assistant", 9), ("user", 3)]).messages
    new = [user("and now?")]
    exact = COUNTER.count_messages(new) + sum(m.tokens for m in window)
    ctx = build_context(
        system_prompt=None,
        summary=None,
        hints=[],
        window=window,
        new_messages=new,
        max_tokens=exact + spare,
        counter=COUNTER,
    )
    if spare == 0:  # every message fits, the oldest exactly
        assert (ctx.window_messages, ctx.tokens) == (len(window), exact)
    else:  # one token short: the oldest is dropped
        assert (ctx.window_messages, ctx.tokens) == (len(window) - 1, exact - window[0].tokens)
