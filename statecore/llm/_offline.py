"""A deterministic chat model that needs no network: the default for demos and tests.

The reply is a pure function of the request (no clock, no randomness), and it describes the
context it was given, so a test can tell a right context from a wrong one.

Rules, applied to the last message of the request (``purpose="chat"``):

1. **Tool results.** When the last message is a tool result, the reply is a final text that
   quotes every trailing tool result: ``Tool get_weather returned: {...}``. The tool's name is
   taken from the assistant tool call the result answers.
2. **Tool directive.** When the last message is a user message containing
   ``use tool <name> <json-object>`` (case-insensitive, on one line; the arguments may be
   omitted and default to ``{}``) and the request offers a tool called ``<name>``, the reply is
   an assistant message with no text and one tool call to it (``finish_reason="tool_calls"``).
   Its id is derived from the request, so the same request gives the same id. A directive
   naming a tool that is not offered, or with arguments that are not a JSON object, gets a
   text reply saying so.
3. **Otherwise** the reply echoes the last user message (up to ``ECHO_LIMIT`` characters).

Every text reply starts with a context report::

    [offline] user messages: 3, messages: 7, system prompt: yes, summary: no, hints: 2.

System messages are recognised by ``metadata[CONTEXT_PART]`` (see ``statecore.llm._base``):
an unmarked one counts as the system prompt, and each ``- `` line of a ``hints`` message is
one hint. ``max_tokens`` cuts a text reply to
that many tokens with ``finish_reason="length"``.

``purpose="summarize"`` returns an extractive summary: the previous summary (system messages
marked ``summary``) followed by one bullet per non-empty line of every other non-system
message, each cut to its first sentence and ``SUMMARY_LINE_LIMIT`` characters. When over
``max_tokens`` (default ``DEFAULT_SUMMARY_TOKENS``), the oldest lines are dropped first.

``stream`` yields the same reply word by word (each word with the whitespace after it), then
its tool calls, then the whole response; ``OfflineModel(token_delay=0.05)`` waits that long
before each word, for demos and tests of streaming. Without a delay the words come without a
pause, and a turn streams nothing before it commits.

Usage is counted with ``statecore.core._tokens.TokenCounter``: the prompt is the request's messages
plus the JSON of the offered tools; the completion is the reply without its message overhead.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections.abc import AsyncIterator

from statecore.core._errors import InvalidInputError
from statecore.core._models import Message, TokenUsage, ToolCall
from statecore.core._tokens import MESSAGE_OVERHEAD, TokenCounter
from statecore.llm._base import (
    CONTEXT_PART,
    ModelRequest,
    ModelResponse,
    StreamItem,
    TextDelta,
    ToolCallDelta,
)

ECHO_LIMIT = 1000
SUMMARY_LINE_LIMIT = 200
DEFAULT_SUMMARY_TOKENS = 512

_DIRECTIVE_RE = re.compile(r"\buse tool\s+([A-Za-z0-9_-]+)[ \t]*(.*)$", re.IGNORECASE | re.M)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s")
_WORD_RE = re.compile(r"\s*\S+\s*|\s+")


class OfflineModel:
    """Deterministic offline model; see the module docstring for its rules."""

    name = "offline"
    #: The window this model declares (a session without max_tokens gets it, less the reply's
    #: room): as large as the common hosted models', so tests meet the same budgets.
    context_window = 128_000

    def __init__(
        self, token_counter: TokenCounter | None = None, *, token_delay: float = 0.0
    ) -> None:
        if (
            isinstance(token_delay, bool)
            or not isinstance(token_delay, int | float)
            or not math.isfinite(token_delay)
            or not 0 <= token_delay <= 60
        ):
            raise InvalidInputError(f"token_delay is {token_delay!r}; use 0 to 60 seconds")
        self._counter = token_counter or TokenCounter()
        self.token_delay = float(token_delay)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """The reply of ``complete``, word by word (see the module docstring)."""
        response = await self.complete(request)
        for word in _WORD_RE.findall(response.message.content):
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            yield TextDelta(word)
        for call in response.message.tool_calls:
            yield ToolCallDelta(call)
        yield response

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request`` by the documented rules; never raises for any valid request."""
        if request.purpose == "summarize":
            reply, finish_reason = self._summarize(request), "stop"
        else:
            reply, finish_reason = self._chat(request)
        return ModelResponse(
            message=reply,
            usage=TokenUsage(
                prompt_tokens=self._prompt_tokens(request),
                completion_tokens=self._counter.count_message(reply) - MESSAGE_OVERHEAD,
            ),
            finish_reason=finish_reason,
            model=self.name,
        )

    # --- chat ----------------------------------------------------------------------------------

    def _chat(self, request: ModelRequest) -> tuple[Message, str]:
        messages = request.messages
        last = messages[-1]
        if last.role == "tool":
            body = _tool_results(messages)
        elif last.role == "user" and (match := _DIRECTIVE_RE.search(last.content)):
            call_or_text = _tool_call(request, match.group(1), match.group(2).strip())
            if isinstance(call_or_text, ToolCall):
                return Message(role="assistant", tool_calls=[call_or_text]), "tool_calls"
            body = call_or_text
        else:
            body = _echo(messages)
        text = f"{_context_report(messages)} {body}"
        return self._fit(text, request.max_tokens)

    def _fit(self, text: str, max_tokens: int | None) -> tuple[Message, str]:
        if max_tokens is None or self._counter.count_text(text) <= max_tokens:
            return Message(role="assistant", content=text), "stop"
        # Longest prefix within the budget; at least one character so the reply is not empty.
        low, high = 1, len(text)
        while low < high:
            mid = (low + high + 1) // 2
            if self._counter.count_text(text[:mid]) <= max_tokens:
                low = mid
            else:
                high = mid - 1
        return Message(role="assistant", content=text[:low]), "length"

    # --- summarize -----------------------------------------------------------------------------

    def _summarize(self, request: ModelRequest) -> Message:
        lines: list[str] = []
        for message in request.messages:
            if message.role == "system":
                if message.metadata.get(CONTEXT_PART) == "summary":
                    lines.extend(ln for ln in message.content.splitlines() if ln.strip())
                continue
            lines.extend(f"- {_first_sentence(ln)}" for ln in _lines_of(message))
        budget = request.max_tokens or DEFAULT_SUMMARY_TOKENS
        lines = lines[self._newest_lines_within(lines, budget) :]
        text = "\n".join(lines) or "Nothing to summarize."
        message, _ = self._fit(text, budget)
        return message

    def _newest_lines_within(self, lines: list[str], budget: int) -> int:
        """Where the longest run of trailing ``lines`` that fits ``budget`` starts (at most
        the last line). Counting the joined text once per dropped line made a summary of a
        long window quadratic; per-line counts find the spot, then the exact count of the
        joined text settles it."""
        if len(lines) <= 1:
            return 0
        count = self._counter.count_text
        start, used = len(lines), -1  # n lines joined by "\n" add n - 1 separators
        while start > 0 and used + 1 + count(lines[start - 1]) <= budget:
            start -= 1
            used += 1 + count(lines[start])
        start = min(start, len(lines) - 1)

        def fits(first: int) -> bool:
            return count("\n".join(lines[first:])) <= budget

        while start > 0 and fits(start - 1):
            start -= 1
        while start < len(lines) - 1 and not fits(start):
            start += 1
        return start

    def _prompt_tokens(self, request: ModelRequest) -> int:
        tools = sum(self._counter.count_text(t.model_dump_json()) for t in request.tools)
        # The assembled context was counted from the stored per-message counts; counting the
        # whole prompt again would re-tokenise the history on every turn.
        if request.prompt_tokens is not None:
            return request.prompt_tokens + tools
        return self._counter.count_messages(request.messages) + tools


def _context_report(messages: list[Message]) -> str:
    system = [m for m in messages if m.role == "system"]
    parts = {str(m.metadata.get(CONTEXT_PART, "system_prompt")) for m in system}
    hints = sum(
        max(1, sum(1 for ln in m.content.splitlines() if ln.startswith("- ")))
        for m in system
        if m.metadata.get(CONTEXT_PART) == "hints"
    )
    users = sum(1 for m in messages if m.role == "user")
    return (
        f"[offline] user messages: {users}, messages: {len(messages)}, "
        f"system prompt: {_yes_no('system_prompt' in parts)}, "
        f"summary: {_yes_no('summary' in parts)}, hints: {hints}."
    )


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _echo(messages: list[Message]) -> str:
    last_user = next((m for m in reversed(messages) if m.role == "user"), None)
    if last_user is None:
        return "No user message in the context."
    return f'You said: "{_clip(last_user.content, ECHO_LIMIT)}"'


def _tool_call(request: ModelRequest, name: str, raw_args: str) -> ToolCall | str:
    if request.tool(name) is None:
        offered = ", ".join(t.name for t in request.tools) or "none"
        return f"Tool {name!r} is not offered in this request (offered: {offered})."
    try:
        args = json.loads(raw_args or "{}")
    except json.JSONDecodeError:
        args = None
    if not isinstance(args, dict):
        return f"Tool {name!r} needs a JSON object as arguments; got: {_clip(raw_args, 200)}"
    arguments = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
    seed = f"{len(request.messages)}\n{name}\n{arguments}\n{request.messages[-1].content}"
    call_id = "call_" + hashlib.sha256(seed.encode()).hexdigest()[:24]
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _tool_results(messages: list[Message]) -> str:
    trailing: list[Message] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        trailing.insert(0, message)
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    quoted = []
    for result in trailing:
        tool = names.get(result.tool_call_id or "") or result.name or result.tool_call_id
        quoted.append(f"Tool {tool} returned: {_clip(result.content, ECHO_LIMIT)}")
    return " ".join(quoted)


def _lines_of(message: Message) -> list[str]:
    lines = [ln.strip() for ln in message.content.splitlines() if ln.strip()]
    lines.extend(f"called tool {c.name} with {c.arguments}" for c in message.tool_calls)
    return lines


def _first_sentence(line: str) -> str:
    line = " ".join(line.split())
    return _clip(_SENTENCE_END_RE.split(line, maxsplit=1)[0], SUMMARY_LINE_LIMIT)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
