"""The plugin's ``agents=`` argument, made into turn runners.

A framework's agent object is wrapped by its integration, imported only when such an object is
passed, so a worker without framework agents never imports a framework.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statecore.core._models import validate_identifier
from statecore.operations._agent_turns import AgentTurnRunner


def agent_runners(agents: Mapping[str, Any]) -> dict[str, AgentTurnRunner]:
    """``{name: runner}`` for ``{name: agent}``; ``ValueError`` for what cannot run a turn."""
    if not isinstance(agents, Mapping):
        raise ValueError("agents must be a mapping of name -> agent")
    runners: dict[str, AgentTurnRunner] = {}
    for name, agent in agents.items():
        try:
            validate_identifier(name, "agent name")
        except Exception as exc:
            raise ValueError(str(exc)) from exc
        runners[name] = _runner(name, agent)
    return runners


def _runner(name: str, agent: Any) -> AgentTurnRunner:
    if isinstance(agent, AgentTurnRunner):
        return agent
    if type(agent).__module__.split(".")[0] == "agents":
        from statecore.integrations.openai_agents._turns import OpenAIAgentTurn

        return OpenAIAgentTurn(agent)
    if any(c.__module__.startswith("google.adk.") for c in type(agent).__mro__):
        from statecore.integrations.google_adk._turns import ADKAgentTurn

        return ADKAgentTurn(agent)
    if type(agent).__module__.split(".")[0] == "langgraph":
        from statecore.integrations.langgraph._turns import LangGraphAgent

        return LangGraphAgent(agent, name=name)
    if type(agent).__module__.split(".")[0] == "pydantic_ai":
        from statecore.integrations.pydantic_ai._turns import PydanticAIAgentTurn

        return PydanticAIAgentTurn(agent, name=name)
    raise ValueError(
        f"agents[{name!r}] is a {type(agent).__name__}; pass an agents.Agent (OpenAI Agents "
        "SDK), a LangGraph StateGraph or compiled graph, a pydantic_ai.Agent, a google.adk "
        "agent, or an object with async run_turn(request) (statecore.operations._agent_turns)"
    )
