"""Chat models for statecore: a deterministic offline model and an OpenAI-compatible client.

Both implement ``ChatModel``; ``model_from_config`` builds one from a short spec, which is how
the worker and the CLI choose a model from their flags.
"""

from __future__ import annotations

from statecore.core._errors import InvalidInputError
from statecore.llm._base import (
    CONTEXT_PART,
    ChatModel,
    ModelRequest,
    ModelResponse,
    ToolSpec,
)
from statecore.llm._offline import OfflineModel
from statecore.llm._openai_compat import OpenAICompatibleModel
from statecore.llm._summarizer import ModelSummarizer

__all__ = [
    "CONTEXT_PART",
    "ChatModel",
    "ModelRequest",
    "ModelResponse",
    "ModelSummarizer",
    "OfflineModel",
    "OpenAICompatibleModel",
    "ToolSpec",
    "model_from_config",
]

_OPENAI_PREFIX = "openai:"


def model_from_config(
    spec: str, *, api_key: str | None = None, base_url: str | None = None
) -> ChatModel:
    """Build a model from ``"offline"`` or ``"openai:<model-name>"``.

    ``base_url`` is required for ``openai:`` (e.g. ``http://127.0.0.1:11434/v1`` for Ollama);
    ``api_key`` is optional there. The offline model takes neither, and giving either with it
    is an error, so a misconfigured deployment is not silently served by the offline model.
    """
    spec = spec.strip()
    if spec == "offline":
        if base_url is not None or api_key is not None:
            raise InvalidInputError(
                "the offline model takes no base_url or api_key; "
                "use 'openai:<model-name>' to call a server"
            )
        return OfflineModel()
    if spec.startswith(_OPENAI_PREFIX):
        name = spec[len(_OPENAI_PREFIX) :].strip()
        if not name:
            raise InvalidInputError(
                "model spec 'openai:' names no model; use e.g. 'openai:gpt-4o-mini'"
            )
        if not base_url:
            raise InvalidInputError(
                f"model {spec!r} needs base_url, the API root of an OpenAI-compatible server "
                "(e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1)"
            )
        return OpenAICompatibleModel(base_url, api_key=api_key, model=name)
    raise InvalidInputError(f"unknown model spec {spec!r}; use 'offline' or 'openai:<model-name>'")
