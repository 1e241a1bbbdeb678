"""The OpenAI Agents SDK on statecore: its ``Session``, and its agents as durable turns.

Needs the ``openai-agents`` extra: ``pip install 'statecore[openai-agents]'``.
"""

from __future__ import annotations

try:
    import agents as _agents  # noqa: F401  (the check that the extra is installed)
except ImportError as exc:  # pragma: no cover - exercised in a bare environment only
    raise ImportError(
        "statecore.integrations.openai_agents needs the OpenAI Agents SDK; install it with "
        "pip install 'statecore[openai-agents]'"
    ) from exc

from statecore.core._errors import AgentRunError, UnknownAgentError
from statecore.integrations.openai_agents._offline import OfflineAgentModel
from statecore.integrations.openai_agents._session import StatecoreSession, TurnBoundSession
from statecore.integrations.openai_agents._turns import OpenAIAgentTurn

__all__ = [
    "AgentRunError",
    "OfflineAgentModel",
    "OpenAIAgentTurn",
    "StatecoreSession",
    "TurnBoundSession",
    "UnknownAgentError",
]
