"""Summarizers: what folds messages leaving the window into the running summary.

A model-backed summarizer lives with the model clients; ``ExtractiveSummarizer`` is the
deterministic fallback used when no model is configured.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from statecore.core._models import StoredMessage
from statecore.core._profile import check_limit

if TYPE_CHECKING:
    from statecore.core._tokens import TokenCounter

DEFAULT_SUMMARY_TOKENS = 512
DEFAULT_LINE_CHARS = 240
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@runtime_checkable
class Summarizer(Protocol):
    """Folds ``messages`` (ascending) and the previous summary into a new summary text."""

    async def summarize(
        self, previous_summary: str | None, messages: Sequence[StoredMessage]
    ) -> str: ...


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def first_sentence(text: str, limit: int = DEFAULT_LINE_CHARS) -> str:
    """The first sentence of ``text`` with whitespace collapsed, at most ``limit`` characters."""
    collapsed = " ".join(text.split())
    return _clip(_SENTENCE_END.split(collapsed, maxsplit=1)[0], limit)


class ExtractiveSummarizer:
    """A summary without a model: one line per folded user or assistant message (its first
    sentence, or the tools an assistant called), after the previous summary's lines.

    Deterministic and bounded: lines are at most ``max_line_chars`` characters and the text at
    most ``max_tokens`` tokens. When over the cap, the oldest lines go first, except the very
    first line, which usually states what the conversation is about.
    """

    def __init__(
        self,
        counter: TokenCounter,
        *,
        max_tokens: int = DEFAULT_SUMMARY_TOKENS,
        max_line_chars: int = DEFAULT_LINE_CHARS,
    ) -> None:
        self._counter = counter
        # 16 tokens always hold a clipped line, so fitting the cap always terminates.
        self.max_tokens = check_limit(max_tokens, "max_tokens", minimum=16)
        self.max_line_chars = check_limit(max_line_chars, "max_line_chars", maximum=10_000)

    async def summarize(
        self, previous_summary: str | None, messages: Sequence[StoredMessage]
    ) -> str:
        lines = [
            _clip(line, self.max_line_chars)
            for line in (previous_summary or "").splitlines()
            if line.strip()
        ]
        for msg in messages:
            if msg.role not in ("user", "assistant"):
                continue
            if msg.content.strip():
                lines.append(f"- {msg.role}: {first_sentence(msg.content, self.max_line_chars)}")
            elif msg.tool_calls:
                names = ", ".join(dict.fromkeys(call.name for call in msg.tool_calls))
                lines.append(_clip(f"- assistant called {names}", self.max_line_chars))
        if not lines:
            lines = [f"- {len(messages)} earlier messages held no conversational text"]
        return self._fit(lines)

    def _fit(self, lines: list[str]) -> str:
        count = self._counter.count_text
        # Per-line counts (+1 for the newline) bound the joined text's count closely; the
        # exact count of the joined text is checked after.
        costs = [count(line) + 1 for line in lines]
        total = sum(costs)
        while len(lines) > 2 and total > self.max_tokens:
            total -= costs.pop(1)
            lines.pop(1)
        text = "\n".join(lines)
        while count(text) > self.max_tokens:
            if len(lines) > 1:
                lines.pop(1 if len(lines) > 2 else 0)
            else:
                lines[0] = lines[0][: max(1, len(lines[0]) // 2)].rstrip() + "…"
            text = "\n".join(lines)
        return text
