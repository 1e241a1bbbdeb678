"""The one rule for a message that can never fit its session's context budget.

A turn's context holds at least the reply's priming and the turn's new message, so a
message that alone, primed, needs more tokens than the budget can never be answered,
whatever the session's history. Every door that refuses such a message before its turn
runs (the client before sending, the AgentSession update validator before acceptance) asks
this module, with the tokenizer the turn activity counts with, so a message one door
admits is never refused as never fitting by another.

Counting is exact, but skipped when it cannot matter: a BPE token covers at least one byte
of UTF-8 (special-token lookalikes in user text are counted as plain text), so a message
whose bytes, with the overheads, fit the budget fits it in tokens too. Only a longer
message is counted: at most 512 KiB of content, a fraction of a second.
"""

from __future__ import annotations

from statecore.core._errors import ContextBudgetError
from statecore.core._models import Message
from statecore.core._tokens import (
    DEFAULT_ENCODING,
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    REPLY_PRIMING,
    TOOL_CALL_OVERHEAD,
    TokenCounter,
)


def most_tokens(message: Message) -> int:
    """An upper bound of ``TokenCounter.count_messages([message])``, from byte lengths."""

    def size(text: str | None) -> int:
        return len(text.encode("utf-8")) if text else 0

    bound = REPLY_PRIMING + MESSAGE_OVERHEAD + size(message.content)
    if message.name:
        bound += NAME_OVERHEAD + size(message.name)
    for call in message.tool_calls:
        bound += TOOL_CALL_OVERHEAD + size(call.name) + size(call.arguments)
    return bound + size(message.tool_call_id)


def check_message_fits(message: Message, budget: int, *, encoding: str | None = None) -> None:
    """Raise ContextBudgetError, naming ``budget``, if ``message`` alone with the reply's
    priming needs more than ``budget`` tokens in ``encoding`` (statecore's default if None):
    its turn could never run."""
    if most_tokens(message) <= budget:
        return
    needed = TokenCounter(encoding or DEFAULT_ENCODING).count_messages([message])
    if needed > budget:
        raise ContextBudgetError(
            f"the message needs {needed} tokens and the session's context budget is "
            f"{budget}: it can never fit. Shorten it, raise profile.max_tokens, or store "
            "the text in KV or scoped state and send a reference",
            needed=needed,
            max_tokens=budget,
        )
