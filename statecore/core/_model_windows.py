"""Context windows of common models, so a session's default budget follows its model.

A session whose profile sets no ``max_tokens`` gets its model's window less room for the
reply (``context_budget``). A model client states its own window (``context_window``); an
OpenAI-compatible client looks its model name up here unless given one. A name this table
does not know gets ``DEFAULT_CONTEXT_BUDGET``: small, but it fits every chat model.
"""

from __future__ import annotations

from statecore.core._limits import DEFAULT_CONTEXT_BUDGET, MAX_REPLY_RESERVE

#: Tokens of a model's window, by model name prefix (the longest matching prefix wins, so
#: ``gpt-4o-mini`` is not read as ``gpt-4``). Figures are the vendors' published windows.
MODEL_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "gemini-1.5": 1_048_576,
    "gemini-2": 1_048_576,
    "llama3": 8_192,
    "llama-3": 8_192,
    "llama3.1": 131_072,
    "llama-3.1": 131_072,
    "llama3.2": 131_072,
    "llama-3.2": 131_072,
    "mistral": 32_768,
    "mixtral": 32_768,
    "qwen2.5": 32_768,
}


def context_window_for(model_name: str) -> int | None:
    """The window of ``model_name`` (``"gpt-4o-2024-08-06"``, ``"openai:gpt-4o"``), or None."""
    name = model_name.rsplit(":", 1)[-1].rsplit("/", 1)[-1].lower()
    matches = [prefix for prefix in MODEL_CONTEXT_WINDOWS if name.startswith(prefix)]
    return MODEL_CONTEXT_WINDOWS[max(matches, key=len)] if matches else None


def context_budget(max_tokens: int | None, context_window: int | None) -> int:
    """The context budget of a turn: the profile's ``max_tokens`` when set, else the model's
    window less room for the reply, else ``DEFAULT_CONTEXT_BUDGET``."""
    if max_tokens is not None:
        return max_tokens
    if context_window is None:
        return DEFAULT_CONTEXT_BUDGET
    return context_window - min(MAX_REPLY_RESERVE, context_window // 4)
