"""Context assembly: what the model sees on a turn, within a token budget.

The order: system prompt, summary, hints, the rolling window of recent messages
that fit what is left of the budget (newest kept, oldest dropped first), then the new
messages. ``build_context`` is pure; ``assemble_context`` loads the parts through the storage
contract and calls it. Stored messages carry the token count taken when they were written,
so nothing here re-tokenises the history.

A tool call is never split from its result: an assistant message with ``tool_calls`` enters
the context only together with every tool result it asked for, and a tool result never
appears without its call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Literal, NamedTuple

from statecore.core._errors import (
    ContextBudgetError,
    InvalidInputError,
    SessionNotFoundError,
)
from statecore.core._models import Message, SessionRef, StatecoreModel, StoredMessage
from statecore.core._prechecked import prechecked
from statecore.core._profile import check_limit

if TYPE_CHECKING:  # tiktoken and SQL stay out of this module's imports (sandbox-friendly)
    from statecore.core._tokens import TokenCounter
    from statecore.store._base import StoreTransaction

SUMMARY_LABEL = "Summary of the earlier conversation:"
HINTS_LABEL = "Important context:"
#: ``Message.metadata`` key naming the part a system message was assembled from.
PART_KEY = "statecore.part"


class AssembledContext(StatecoreModel):
    """The messages to send to the model and what they cost."""

    messages: list[Message]
    #: ``counter.count_messages(messages)``, reply priming included; never above ``max_tokens``.
    tokens: int
    max_tokens: int
    #: Seq range of the stored messages included (None when none were).
    window_from_seq: int | None = None
    window_to_seq: int | None = None
    window_messages: int = 0
    #: Messages of the supplied window left out (over budget, or a broken tool exchange).
    dropped: int = 0
    system_prompt_tokens: int = 0
    summary_tokens: int = 0
    hints_tokens: int = 0
    window_tokens: int = 0
    new_tokens: int = 0
    priming_tokens: int = 0


ExchangeStatus = Literal["complete", "open", "broken", "orphan"]


class Exchange(NamedTuple):
    """Messages that enter or leave the window together.

    ``complete``: a plain message, or an assistant tool call with every result it asked for.
    ``open``: a tool call at the end of the log still waiting for (some) results.
    ``broken``: a tool call whose results are missing although the log went on.
    ``orphan``: a tool result whose call is not before it (e.g. cut off by the window start).

    A tuple, not a frozen dataclass: context assembly makes one per message of the window on
    every turn, and a frozen dataclass sets each field through ``object.__setattr__``.
    """

    messages: tuple[StoredMessage, ...]
    status: ExchangeStatus
    pending_call_ids: frozenset[str]
    #: The messages' stored token counts, summed once by ``group_exchanges``.
    tokens: int

    @property
    def first_seq(self) -> int:
        return self.messages[0].seq


_NO_CALLS: frozenset[str] = frozenset()


def group_exchanges(messages: Sequence[StoredMessage]) -> list[Exchange]:
    """Split an ascending run of stored messages into exchanges (see ``Exchange``)."""
    out: list[Exchange] = []
    append = out.append
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        if msg.role != "assistant" or not msg.tool_calls:
            # Most messages: alone, complete unless a tool result without its call.
            status: ExchangeStatus = "orphan" if msg.role == "tool" else "complete"
            append(Exchange((msg,), status, _NO_CALLS, msg.tokens))
            i += 1
            continue
        pending = {call.id for call in msg.tool_calls}
        j = i + 1
        # Parallel calls stored one per message (as Responses-API items are) belong to
        # the same exchange as the results that follow them. Only within one turn: calls
        # of two turns in a row are two exchanges (the earlier one left unanswered).
        while (
            j < n
            and messages[j].role == "assistant"
            and messages[j].tool_calls
            and messages[j].turn_id == msg.turn_id
        ):
            pending |= {call.id for call in messages[j].tool_calls}
            j += 1
        while j < n and messages[j].role == "tool" and messages[j].tool_call_id in pending:
            pending.discard(messages[j].tool_call_id or "")
            j += 1
        status = "complete" if not pending else "open" if j == n else "broken"
        group = tuple(messages[i:j])
        append(Exchange(group, status, frozenset(pending), sum(m.tokens for m in group)))
        i = j
    return out


def leading_tool_results(new_messages: Sequence[Message]) -> set[str]:
    """Call ids answered by tool results at the start of ``new_messages``: those calls were
    made in an earlier turn, so their assistant message must close the window."""
    ids: set[str] = set()
    for msg in new_messages:
        if msg.role != "tool":
            break
        ids.add(msg.tool_call_id or "")
    return ids


def _plain(msg: Message) -> Message:
    # Stored rows and new messages were validated already; copying the fields skips a
    # second validation pass (the window is rebuilt on every turn). A copy, not the stored
    # message itself: the model may change what it is given, and cached windows are reused.
    d = msg.__dict__
    return prechecked(
        Message,
        {
            "role": d["role"],
            "content": d["content"],
            "name": d["name"],
            "tool_calls": list(d["tool_calls"]),
            "tool_call_id": d["tool_call_id"],
            "metadata": dict(d["metadata"]),
        },
    )


def _has_tool_messages(window: Sequence[StoredMessage]) -> bool:
    """Whether any message of ``window`` calls a tool or answers one."""
    return any(m.tool_calls or m.role == "tool" for m in window)


def _newest_that_fit(window: Sequence[StoredMessage], budget: int) -> Sequence[StoredMessage]:
    """The newest messages of ``window`` whose tokens sum to at most ``budget``: its window
    when every message is an exchange of its own (``_has_tool_messages`` is false)."""
    start = len(window)
    while start and window[start - 1].tokens <= budget:
        start -= 1
        budget -= window[start].tokens
    return window[start:]


def _part(text: str, part: str) -> Message:
    return Message(role="system", content=text, metadata={PART_KEY: part})


@dataclass(frozen=True)
class _Head:
    """The system-message parts that precede the window, with their token counts."""

    messages: list[Message]
    prompt_tokens: int
    summary_tokens: int
    hints_tokens: int
    priming_tokens: int

    @property
    def tokens(self) -> int:
        return self.priming_tokens + self.prompt_tokens + self.summary_tokens + self.hints_tokens


def _head(
    system_prompt: str | None, summary: str | None, hints: Sequence[str], counter: TokenCounter
) -> _Head:
    has_prompt = system_prompt is not None and system_prompt.strip() != ""
    prompt = [_part(system_prompt, "system_prompt")] if system_prompt and has_prompt else []
    summ = (
        [_part(f"{SUMMARY_LABEL}\n{summary.strip()}", "summary")]
        if summary and summary.strip()
        else []
    )
    lines = [f"- {h.strip()}" for h in hints if h.strip()]
    hint = [_part("\n".join([HINTS_LABEL, *lines]), "hints")] if lines else []
    return _Head(
        messages=[*prompt, *summ, *hint],
        prompt_tokens=sum(counter.count_message(m) for m in prompt),
        summary_tokens=sum(counter.count_message(m) for m in summ),
        hints_tokens=sum(counter.count_message(m) for m in hint),
        priming_tokens=counter.count_messages(()),
    )


def build_context(
    *,
    system_prompt: str | None,
    summary: str | None,
    hints: Sequence[str],
    window: Sequence[StoredMessage],
    new_messages: Sequence[Message],
    max_tokens: int,
    counter: TokenCounter,
) -> AssembledContext:
    """Assemble the context in that order within ``max_tokens`` (pure; no I/O).

    ``window`` is the stored window, ascending by seq; its messages cost their stored
    ``tokens``. The newest whole exchanges that fit the budget left by the other parts are
    kept; older ones are dropped, as are orphaned tool results and tool calls missing results.
    Raises ContextBudgetError when the parts that cannot be dropped exceed ``max_tokens``.
    """
    check_limit(max_tokens, "max_tokens")
    if any(b.seq <= a.seq for a, b in pairwise(window)):
        raise InvalidInputError("window must be in ascending seq order without repeats")
    head = _head(system_prompt, summary, hints, counter)
    new_plain = [_plain(m) for m in new_messages]
    new_t = sum(counter.count_message(m) for m in new_plain)

    # Tool results among the new messages pin the open call that asked for them.
    answered = leading_tool_results(new_messages)
    pinned: Exchange | None = None
    # A window without tool calls or results (most) needs no grouping: each message is an
    # exchange of its own, complete. Grouping makes objects per message on every turn.
    exchanges = group_exchanges(window) if answered or _has_tool_messages(window) else None
    if answered:
        assert exchanges is not None
        last = exchanges[-1] if exchanges else None
        if last is None or last.status != "open" or not last.pending_call_ids <= answered:
            raise InvalidInputError(
                "new_messages start with tool results whose assistant call is not the last "
                "stored message; send the call together with its results",
                call_ids=sorted(answered),
            )
        pinned = exchanges.pop()

    mandatory = head.tokens + new_t + (pinned.tokens if pinned else 0)
    if mandatory > max_tokens:
        raise ContextBudgetError(
            f"the system prompt, summary, hints and new messages need {mandatory} tokens; the "
            f"budget is {max_tokens}. Raise max_tokens, shorten the new messages or compact",
            needed=mandatory,
            max_tokens=max_tokens,
        )

    remaining = max_tokens - mandatory
    window_msgs: Sequence[StoredMessage]
    if exchanges is None:
        window_msgs = _newest_that_fit(window, remaining)
    else:
        kept: list[Exchange] = [pinned] if pinned else []
        for exchange in reversed(exchanges):
            if exchange.status != "complete":
                continue  # unusable on its own: the model API rejects split tool exchanges
            if exchange.tokens > remaining:
                break  # a contiguous window: everything older than this is dropped too
            kept.append(exchange)
            remaining -= exchange.tokens
        kept.reverse()
        window_msgs = [m for ex in kept for m in ex.messages]
    window_t = sum(m.tokens for m in window_msgs)
    # Built from values made valid here: validating it would run every message's checks again.
    return AssembledContext.model_construct(
        messages=[*head.messages, *(_plain(m) for m in window_msgs), *new_plain],
        tokens=mandatory + window_t - (pinned.tokens if pinned else 0),
        max_tokens=max_tokens,
        window_from_seq=window_msgs[0].seq if window_msgs else None,
        window_to_seq=window_msgs[-1].seq if window_msgs else None,
        window_messages=len(window_msgs),
        dropped=len(window) - len(window_msgs),
        system_prompt_tokens=head.prompt_tokens,
        summary_tokens=head.summary_tokens,
        hints_tokens=head.hints_tokens,
        window_tokens=window_t,
        new_tokens=new_t,
        priming_tokens=head.priming_tokens,
    )


async def assemble_context(
    tx: StoreTransaction,
    ref: SessionRef,
    new_messages: Sequence[Message],
    *,
    max_tokens: int,
    counter: TokenCounter,
) -> AssembledContext:
    """Load the session's parts and build its context for ``new_messages``.

    The window is read with ``tail(max_tokens=<budget left>)``: the store bounds it with its
    cumulative token totals, so the cost does not grow with the conversation's length.
    """
    check_limit(max_tokens, "max_tokens")
    info = await tx.sessions.get(ref)
    if info is None:
        raise SessionNotFoundError(f"session {ref} does not exist; ensure it first")
    summary = await tx.conversation.summary(ref)
    summary_text = summary.text if summary else None
    hints = [h.text for h in await tx.conversation.hints(ref)]
    # What the parts that cannot be dropped leave over is the window's budget.
    head = _head(info.system_prompt, summary_text, hints, counter)
    remaining = max_tokens - head.tokens - sum(counter.count_message(m) for m in new_messages)
    window: list[StoredMessage] = []
    if remaining > 0:
        window = await tx.conversation.tail(ref, max_tokens=remaining)
    if leading_tool_results(new_messages):
        first_seq = window[0].seq if window else info.last_seq + 1
        cut_by_budget = first_seq > info.window_start_seq
        exchanges = group_exchanges(window)
        if cut_by_budget and (not exchanges or exchanges[-1].status != "open"):
            # The call the new tool results answer is stored but did not fit the budget.
            raise ContextBudgetError(
                f"the tool call answered by the new messages does not fit in {max_tokens} "
                "tokens together with the system prompt, summary, hints and new messages",
                max_tokens=max_tokens,
            )
    return build_context(
        system_prompt=info.system_prompt,
        summary=summary_text,
        hints=hints,
        window=window,
        new_messages=new_messages,
        max_tokens=max_tokens,
        counter=counter,
    )
