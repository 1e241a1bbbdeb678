"""Pydantic AI on statecore: its ``ConversationStore``, and its agents as durable turns.

Needs the ``pydantic-ai`` extra: ``pip install 'statecore[pydantic-ai]'``.
"""

from __future__ import annotations

try:
    import pydantic_ai as _pydantic_ai  # noqa: F401  (the check that the extra is installed)
except ImportError as exc:  # pragma: no cover - exercised in a bare environment only
    raise ImportError(
        "statecore.integrations.pydantic_ai needs Pydantic AI; install it with "
        "pip install 'statecore[pydantic-ai]'"
    ) from exc

from statecore.core._errors import AgentRunError, UnknownAgentError
from statecore.integrations.pydantic_ai._store import StatecoreConversationStore
from statecore.integrations.pydantic_ai._turns import PydanticAIAgentTurn

__all__ = [
    "AgentRunError",
    "PydanticAIAgentTurn",
    "StatecoreConversationStore",
    "UnknownAgentError",
]
