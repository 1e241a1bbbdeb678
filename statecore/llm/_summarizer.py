"""Summaries through a chat model, for the ``summarize`` compaction strategy.

The messages to fold are rendered as a plain transcript inside user messages rather than
replayed with their roles: a model shown raw tool calls or questions tends to answer them
instead of summarising them.
"""

from __future__ import annotations

from collections.abc import Sequence

from statecore.core._errors import ModelError
from statecore.core._limits import MAX_MESSAGE_BYTES
from statecore.core._models import Message, StoredMessage
from statecore.llm._base import CONTEXT_PART, ChatModel, ModelRequest

SUMMARY_INSTRUCTIONS = (
    "You keep a running summary of a conversation between a user and an assistant. "
    "Fold the conversation excerpt that follows into the previous summary, if there is one. "
    "Keep facts, decisions, names, numbers, open questions and tool results; drop pleasantries. "
    "Answer with the new summary only, as plain text."
)
#: One transcript line longer than this is cut: a summary never needs a whole document.
MAX_TRANSCRIPT_LINE = 2000
# Transcript chunks stay well under the per-message limit, leaving room for the role prefix.
_CHUNK_BYTES = MAX_MESSAGE_BYTES // 2


class ModelSummarizer:
    """Folds messages into a running summary with ``model`` (``purpose="summarize"``)."""

    def __init__(
        self,
        model: ChatModel,
        *,
        max_summary_tokens: int = 512,
        instructions: str = SUMMARY_INSTRUCTIONS,
    ) -> None:
        self.model = model
        self.max_summary_tokens = max_summary_tokens
        self.instructions = instructions

    async def summarize(
        self, previous_summary: str | None, messages: Sequence[StoredMessage]
    ) -> str:
        """The new summary of ``previous_summary`` plus ``messages``.

        With no messages there is nothing to fold: the previous summary is returned unchanged
        (``""`` when there was none) and the model is not called."""
        if not messages:
            return previous_summary or ""
        prompt = [Message(role="system", content=self.instructions)]
        if previous_summary and previous_summary.strip():
            prompt.append(
                Message(
                    role="system",
                    content=previous_summary,
                    metadata={CONTEXT_PART: "summary"},
                )
            )
        prompt.extend(Message(role="user", content=chunk) for chunk in _transcript(messages))
        response = await self.model.complete(
            ModelRequest(
                messages=prompt,
                purpose="summarize",
                max_tokens=self.max_summary_tokens,
                temperature=0,
            )
        )
        text = response.message.content.strip()
        if not text:
            raise ModelError(
                f"{self.model.name} returned no summary text "
                f"(finish_reason={response.finish_reason})"
            )
        return text


def _transcript(messages: Sequence[StoredMessage]) -> list[str]:
    """One line per message, grouped into chunks that each fit in one message."""
    tool_names = {c.id: c.name for m in messages for c in m.tool_calls}
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for message in messages:
        line = _line(message, tool_names)
        line_bytes = len(line.encode("utf-8")) + 1
        if current and size + line_bytes > _CHUNK_BYTES:
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += line_bytes
    if current:
        chunks.append("\n".join(current))
    return chunks


def _line(message: StoredMessage, tool_names: dict[str, str]) -> str:
    parts = [" ".join(message.content.split())] if message.content.strip() else []
    parts.extend(f"called tool {c.name} with {c.arguments}" for c in message.tool_calls)
    speaker: str = message.role
    if message.role == "tool":
        speaker = f"tool {tool_names.get(message.tool_call_id or '') or message.name or 'result'}"
    elif message.name:
        speaker = f"{message.role} ({message.name})"
    text = "; ".join(parts) or "(empty)"
    if len(text) > MAX_TRANSCRIPT_LINE:
        text = text[: MAX_TRANSCRIPT_LINE - 1] + "…"
    return f"{speaker}: {text}"
