"""The workflows statecore ships. Pure orchestration: temporalio and statecore's models only."""

from workflows.agent_session import AgentSession

WORKFLOWS: list[type] = [AgentSession]

__all__ = ["WORKFLOWS", "AgentSession"]
