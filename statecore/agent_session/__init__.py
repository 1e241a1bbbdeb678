"""The AgentSession workflow statecore ships: one long-running workflow per session.

``WORKFLOWS`` are what ``StatecorePlugin`` registers on every worker."""

from statecore.agent_session._workflow import AgentSession

WORKFLOWS: list[type] = [AgentSession]

__all__ = ["WORKFLOWS", "AgentSession"]
