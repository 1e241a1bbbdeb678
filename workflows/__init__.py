"""Example workflows built on statecore's turn API; not part of the installed package.

Register them with ``StatecorePlugin(extra_workflows=EXAMPLE_WORKFLOWS)``.
"""

from workflows.tool_agent import ToolAgent

EXAMPLE_WORKFLOWS: list[type] = [ToolAgent]

__all__ = ["EXAMPLE_WORKFLOWS", "ToolAgent"]
