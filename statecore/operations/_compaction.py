"""Compaction: moving the window start forward, and folding what leaves it into the summary.

Compaction never deletes a message. It moves the session's window start (the first seq the
model sees) forward and, for ``summarize``, stores a new running summary of the part that
left the window. The log stays in SQL for audit, export and time travel.

Strategies (``CompactionRequest.strategy``):

- ``recent``: keep the newest ``max_messages`` messages (default 50).
- ``tokens``: keep the newest messages within ``max_tokens`` (default: the session profile's
  ``summarization_threshold``, 3000).
- ``summarize``: once the window holds more than ``max_tokens`` (default: the profile's
  ``summarization_threshold``), fold its oldest part plus the previous summary into a new
  summary, keeping the newest messages within half of ``max_tokens``. The low-water mark means
  the model is asked to summarize once per threshold crossing, not on every turn. It never
  empties the window: the newest turn (from its user message on) stays even when it alone
  is over that half.

When both limits are given, both apply. The new start never splits a tool call from its
results and never passes a tool call that is still waiting for its results.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError, field_validator

from statecore.core._change_events import NewEvent
from statecore.core._errors import (
    ConflictError,
    InvalidInputError,
    ModelError,
    SessionNotFoundError,
    UnknownStrategyError,
    first_problem,
)
from statecore.core._models import (
    SessionInfo,
    SessionRef,
    StatecoreModel,
    StoredMessage,
    validate_text,
)
from statecore.core._profile import SessionProfile, check_limit
from statecore.operations._context_window import group_exchanges
from statecore.operations._summarizers import ExtractiveSummarizer, Summarizer

if TYPE_CHECKING:  # tiktoken and SQL stay out of this module's imports (sandbox-friendly)
    from statecore.core._tokens import TokenCounter
    from statecore.store._base import StateStore, StoreTransaction

Strategy = Literal["recent", "tokens", "summarize"]
STRATEGIES: tuple[str, ...] = ("recent", "tokens", "summarize")
DEFAULT_KEEP_MESSAGES = 50
#: More messages than any window should hold; a larger limit is a typo.
MAX_MESSAGE_LIMIT = 1_000_000

__all__ = [
    "DEFAULT_KEEP_MESSAGES",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionRequest",
    "ExtractiveSummarizer",
    "PreparedCompaction",
    "Summarizer",
    "TransactionHook",
    "apply_compaction",
    "commit_compaction",
    "compact_session",
    "plan_compaction",
    "prepare_compaction",
    "should_auto_summarize",
]


class CompactionRequest(StatecoreModel):
    """What to compact; ``{}`` is valid (``tokens`` with the profile's defaults)."""

    strategy: Strategy = "tokens"
    #: tokens: keep at most this many; summarize: the trigger (keep half); recent: extra cap.
    max_tokens: int | None = None
    #: recent: keep at most this many (default 50); summarize: the trigger (keep half).
    max_messages: int | None = None

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy(cls, v: Any) -> Any:
        if v not in STRATEGIES:
            raise UnknownStrategyError(
                f"compaction strategy {v!r} is unknown; use one of {', '.join(STRATEGIES)}",
                value=repr(v)[:80],
            )
        return v

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _tokens(cls, v: Any) -> int | None:
        return None if v is None else check_limit(v, "max_tokens")

    @field_validator("max_messages", mode="before")
    @classmethod
    def _messages(cls, v: Any) -> int | None:
        return None if v is None else check_limit(v, "max_messages", maximum=MAX_MESSAGE_LIMIT)

    @classmethod
    def parse(cls, raw: Any) -> CompactionRequest:
        """Validate raw signal input (a dict or None); every failure is a statecore error."""
        try:
            return cls.model_validate({} if raw is None else raw)
        except ValidationError as exc:
            raise InvalidInputError(
                f"compaction request is malformed: {first_problem(exc)[1]}; send "
                '{"strategy": "recent"|"tokens"|"summarize", "max_tokens": int, '
                '"max_messages": int}, every field optional',
                errors=exc.error_count(),
            ) from exc


class CompactionPlan(StatecoreModel):
    """Where the window should start after compaction, and what to summarize first."""

    strategy: Strategy
    window_start_before: int
    window_start: int
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    #: Seq range to fold into the summary (summarize only), through ``window_start - 1``.
    summarize_from_seq: int | None = None
    summarize_to_seq: int | None = None
    reason: str

    @property
    def changed(self) -> bool:
        return self.window_start != self.window_start_before


class CompactionOutcome(StatecoreModel):
    """What a compaction did to the window."""

    strategy: Strategy
    changed: bool
    window_start_before: int
    window_start: int
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    summarized_messages: int = 0
    #: The stored summary now covers the log through this seq (None: summary untouched).
    summary_through_seq: int | None = None
    reason: str


def _targets(
    request: CompactionRequest, profile: SessionProfile, tokens: int, count: int
) -> tuple[int | None, int | None, str | None]:
    """(keep at most tokens, keep at most messages, reason to do nothing or None)."""
    if request.strategy == "recent":
        return request.max_tokens, request.max_messages or DEFAULT_KEEP_MESSAGES, None
    if request.strategy == "tokens":
        return request.max_tokens or profile.summarization_threshold, request.max_messages, None
    trigger_t = request.max_tokens or profile.summarization_threshold
    trigger_m = request.max_messages
    if tokens <= trigger_t and (trigger_m is None or count <= trigger_m):
        return None, None, f"window ({tokens} tokens) is within the {trigger_t}-token threshold"
    return max(1, trigger_t // 2), (max(1, trigger_m // 2) if trigger_m else None), None


def plan_compaction(
    request: CompactionRequest,
    *,
    session: SessionInfo,
    tail: Sequence[StoredMessage],
    profile: SessionProfile | None = None,
) -> CompactionPlan:
    """Decide the new window start (pure; no I/O).

    ``tail`` is the session's whole window, ascending: every message from
    ``session.window_start_seq`` on (``await tx.conversation.tail(ref)``).
    """
    if any(b.seq <= a.seq for a, b in pairwise(tail)):
        raise InvalidInputError("tail must be in ascending seq order without repeats")
    if tail and tail[0].seq < session.window_start_seq:
        raise InvalidInputError(
            f"tail starts at seq {tail[0].seq}, before the window start "
            f"{session.window_start_seq}; pass the window only"
        )
    profile = profile or SessionProfile()
    start = session.window_start_seq
    tokens = sum(m.tokens for m in tail)
    plan = {
        "strategy": request.strategy,
        "window_start_before": start,
        "messages_before": len(tail),
        "tokens_before": tokens,
    }
    keep_tokens, keep_messages, idle = _targets(request, profile, tokens, len(tail))
    if idle or not tail:
        reason = idle or "the window is empty"
        return CompactionPlan(
            **plan,
            window_start=start,
            messages_after=len(tail),
            tokens_after=tokens,
            reason=reason,
        )

    exchanges = group_exchanges(tail)
    first_kept, kept_t, kept_m = len(exchanges), 0, 0
    for idx in range(len(exchanges) - 1, -1, -1):
        ex = exchanges[idx]
        if keep_tokens is not None and kept_t + ex.tokens > keep_tokens:
            break
        if keep_messages is not None and kept_m + len(ex.messages) > keep_messages:
            break
        first_kept, kept_t, kept_m = idx, kept_t + ex.tokens, kept_m + len(ex.messages)
    if exchanges[-1].status == "open":
        # Its results are still to come: moving past the call would orphan them.
        first_kept = min(first_kept, len(exchanges) - 1)
    if request.strategy == "summarize":
        # The summary stands in for what leaves the window; when even the newest turn is
        # over the budget (a small max_tokens, a long last reply), emptying the window would
        # not meet the budget either (the summary takes room of its own) and would leave the
        # model without the exchange it is continuing. The newest turn stays, from its user
        # message on.
        newest_turn = max(
            (i for i, ex in enumerate(exchanges) if ex.messages[0].role == "user"),
            default=len(exchanges) - 1,
        )
        first_kept = min(first_kept, newest_turn)
    kept = exchanges[first_kept:]
    new_start = kept[0].first_seq if kept else tail[-1].seq + 1
    new_start = max(new_start, start)
    fold = request.strategy == "summarize" and new_start > start
    return CompactionPlan(
        **plan,
        window_start=new_start,
        messages_after=sum(len(ex.messages) for ex in kept),
        tokens_after=sum(ex.tokens for ex in kept),
        summarize_from_seq=start if fold else None,
        summarize_to_seq=new_start - 1 if fold else None,
        reason=(
            f"window start moves from {start} to {new_start}"
            if new_start > start
            else "the window is within the limits"
        ),
    )


def should_auto_summarize(profile: SessionProfile, window_tokens: int) -> bool:
    """The rule: summarize once the window holds more than the summarization threshold."""
    if isinstance(window_tokens, bool) or not isinstance(window_tokens, int) or window_tokens < 0:
        raise InvalidInputError(f"window_tokens must be a whole number >= 0, not {window_tokens!r}")
    return window_tokens > profile.summarization_threshold


class PreparedCompaction(StatecoreModel):
    """A plan plus what the summarizer needs: read in one transaction, committed in another,
    so a model call never holds a database transaction open."""

    plan: CompactionPlan
    previous_summary: str | None = None
    #: The messages to fold (``summarize_from_seq..summarize_to_seq``); empty otherwise.
    folded: list[StoredMessage] = Field(default_factory=list)


#: Work a caller adds to one of compaction's transactions.
TransactionHook = Callable[["StoreTransaction"], Awaitable[None]]


async def prepare_compaction(
    tx: StoreTransaction,
    ref: SessionRef,
    request: CompactionRequest,
    *,
    profile: SessionProfile | None = None,
) -> PreparedCompaction:
    """Read the window and plan; for ``summarize``, also read the range to fold."""
    info = await tx.sessions.get(ref)
    if info is None:
        raise SessionNotFoundError(f"session {ref} does not exist; nothing to compact")
    window = await tx.conversation.tail(ref)
    plan = plan_compaction(request, session=info, tail=window, profile=profile)
    if plan.summarize_from_seq is None or plan.summarize_to_seq is None:
        return PreparedCompaction(plan=plan)
    previous = await tx.conversation.summary(ref)
    folded = await tx.conversation.messages(
        ref, from_seq=plan.summarize_from_seq, to_seq=plan.summarize_to_seq
    )
    return PreparedCompaction(
        plan=plan, previous_summary=previous.text if previous else None, folded=folded
    )


async def commit_compaction(
    tx: StoreTransaction, ref: SessionRef, prepared: PreparedCompaction, summary: str | None
) -> CompactionOutcome:
    """Store ``summary`` (required when the plan folds messages) and move the window start.
    ConflictError when the session was compacted since ``prepared`` was read."""
    plan = prepared.plan
    if not plan.changed:
        return _outcome(prepared, None)  # nothing to write
    info = await tx.sessions.get(ref)
    if info is None:
        raise SessionNotFoundError(f"session {ref} was deleted before compaction committed")
    stale = info.window_start_seq != plan.window_start_before
    through: int | None = None
    if plan.summarize_to_seq is not None:
        # The new summary replaces the one it was built from; any other would be lost.
        current = await tx.conversation.summary(ref)
        stale = stale or (current.text if current else None) != prepared.previous_summary
    if stale:
        raise ConflictError(
            f"session {ref} was compacted while this compaction was prepared; plan again"
        )
    if plan.summarize_to_seq is not None:
        if not isinstance(summary, str) or not summary.strip():
            raise ModelError("the summarizer returned no summary; the window was left as it was")
        text = validate_text(summary.strip(), "summary")
        through = (await tx.conversation.set_summary(ref, text, plan.summarize_to_seq)).through_seq
    if plan.changed:
        await tx.conversation.set_window_start(ref, plan.window_start)
    outcome = _outcome(prepared, through)
    await tx.events.append(
        ref.namespace,
        [
            NewEvent.of(
                "compaction",
                ref,
                window_start=outcome.window_start,
                summary_through_seq=through,
                tokens_after=outcome.tokens_after,
            )
        ],
    )
    return outcome


def _outcome(prepared: PreparedCompaction, summary_through_seq: int | None) -> CompactionOutcome:
    plan = prepared.plan
    return CompactionOutcome(
        strategy=plan.strategy,
        changed=plan.changed,
        window_start_before=plan.window_start_before,
        window_start=plan.window_start,
        messages_before=plan.messages_before,
        messages_after=plan.messages_after,
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_after,
        summarized_messages=len(prepared.folded),
        summary_through_seq=summary_through_seq,
        reason=plan.reason,
    )


async def _summary_for(
    prepared: PreparedCompaction, summarizer: Summarizer | None, counter: TokenCounter
) -> str | None:
    if prepared.plan.summarize_to_seq is None:
        return None
    summarizer = summarizer or ExtractiveSummarizer(counter)
    return await summarizer.summarize(prepared.previous_summary, prepared.folded)


async def apply_compaction(
    tx: StoreTransaction,
    ref: SessionRef,
    request: CompactionRequest,
    *,
    summarizer: Summarizer | None = None,
    counter: TokenCounter,
    profile: SessionProfile | None = None,
) -> CompactionOutcome:
    """Plan and carry out a compaction inside ``tx``: summarize the folded range (with
    ``summarizer``, or an ``ExtractiveSummarizer`` over ``counter`` when None), store the
    summary, then move the window start. Nothing is written when the summarizer fails.

    The summarizer runs inside ``tx``; with a model summarizer prefer ``compact_session``."""
    prepared = await prepare_compaction(tx, ref, request, profile=profile)
    summary = await _summary_for(prepared, summarizer, counter)
    return await commit_compaction(tx, ref, prepared, summary)


async def compact_session(
    store: StateStore,
    ref: SessionRef,
    request: CompactionRequest,
    *,
    summarizer: Summarizer | None = None,
    counter: TokenCounter,
    profile: SessionProfile | None = None,
    on_plan: TransactionHook | None = None,
    on_commit: TransactionHook | None = None,
) -> CompactionOutcome:
    """Like ``apply_compaction``, but the summarizer (a model call) runs between two short
    transactions instead of inside one; each runs again if it loses a deadlock
    (``run_transaction``). The write fails with ConflictError if the session was compacted
    meanwhile, so the result is as if it ran in one transaction.

    ``on_plan`` and ``on_commit`` run inside the planning and the writing transaction (after
    the plan, after the write), for callers that report what the session held at each point."""
    from statecore.store._retry import run_transaction  # SQL stays out of the sandbox's imports

    async def plan(tx: StoreTransaction) -> PreparedCompaction:
        prepared = await prepare_compaction(tx, ref, request, profile=profile)
        if on_plan is not None:
            await on_plan(tx)
        return prepared

    async def write(tx: StoreTransaction) -> CompactionOutcome:
        outcome = await commit_compaction(tx, ref, prepared, summary)
        if on_commit is not None:
            await on_commit(tx)
        return outcome

    prepared = await run_transaction(store, plan)
    summary = await _summary_for(prepared, summarizer, counter)
    if not prepared.plan.changed and on_commit is None:
        return _outcome(prepared, None)
    return await run_transaction(store, write)
