"""The workflows statecore ships. Pure orchestration: temporalio and statecore's models only.

``WORKFLOWS`` are registered by the plugin on every worker. ``EXAMPLE_WORKFLOWS`` are examples
built on the turn API; register them with ``StatecorePlugin(extra_workflows=EXAMPLE_WORKFLOWS)``.
"""

from workflows.agent_session import AgentSession
from workflows.tool_agent import ToolAgent

WORKFLOWS: list[type] = [AgentSession]
EXAMPLE_WORKFLOWS: list[type] = [ToolAgent]

__all__ = ["EXAMPLE_WORKFLOWS", "WORKFLOWS", "AgentSession", "ToolAgent"]
