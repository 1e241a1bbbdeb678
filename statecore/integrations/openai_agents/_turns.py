"""An OpenAI Agents SDK agent as a statecore turn.

``OpenAIAgentTurn(agent)`` is a statecore ``AgentTurnRunner``: a turn's activity calls it in
place of a model, and it runs ``Runner.run(agent, <the turn's new message>, session=<a session
bound to this turn>)``. The run's items (the user message as the SDK records it, tool calls
and outputs, handoffs, the final message) come back to the activity, which commits them with
the turn record in one transaction. Register it with the plugin by name
(``StatecorePlugin(agents={"support": agent})``).

``OpenAIAgentTurn(agent, stream=True)`` runs ``Runner.run_streamed`` instead and hands the
model's text deltas to the turn's stream as they come (docs/streaming.md); the run, its items
and its commit are the same. Off by default: the agent's model must implement
``stream_response``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents import Agent, RunConfig, Runner
from openai import APIConnectionError, InternalServerError, RateLimitError
from openai.types.responses import ResponseTextDeltaEvent

from statecore.core._errors import (
    AgentRunError,
    InvalidInputError,
    ModelUnavailableError,
    StatecoreError,
)
from statecore.core._models import Message, TokenUsage
from statecore.integrations.openai_agents._session import TurnBoundSession
from statecore.operations._agent_turns import AgentTurnOutcome, AgentTurnRequest

#: What the OpenAI client raises when a retry later can succeed (timeouts are connection
#: errors); anything else a run raises is the turn's own failure.
_TRANSIENT = (APIConnectionError, InternalServerError, RateLimitError)
#: How many model calls one turn's run may make (the SDK's own default).
DEFAULT_MAX_MODEL_CALLS = 10


class OpenAIAgentTurn:
    """Runs ``agent`` for one statecore turn (see the module docstring)."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        run_config: RunConfig | None = None,
        max_turns: int = DEFAULT_MAX_MODEL_CALLS,
        stream: bool = False,
    ) -> None:
        if not isinstance(stream, bool):
            raise ValueError(f"stream must be True or False, not {stream!r}")
        self.stream = stream
        if not isinstance(agent, Agent):
            raise ValueError(f"expected an agents.Agent, got {type(agent).__name__}")
        self.agent = agent
        self.run_config = run_config
        self.max_turns = max_turns

    async def run_turn(self, request: AgentTurnRequest) -> AgentTurnOutcome:
        new = list(request.new_messages)
        if not new or any(m.role != "user" for m in new):
            raise InvalidInputError("an agent turn starts from the user's message(s)")
        session = TurnBoundSession(
            request.store,
            request.ref,
            profile=request.profile,
            new_messages=new,
            token_counter=request.counter,
        )
        run_input: str | list[Any] = (
            new[0].content
            if len(new) == 1
            else [{"role": "user", "content": m.content} for m in new]
        )
        try:
            if self.stream and request.on_text is not None:
                result: Any = await _run_streamed(
                    self.agent, run_input, session, self, request.on_text
                )
            else:
                result = await Runner.run(
                    self.agent,
                    run_input,
                    session=session,
                    run_config=self.run_config,
                    max_turns=self.max_turns,
                )
        except StatecoreError:
            raise  # statecore's own refusals (a bad item, a context over budget) as they are
        except _TRANSIENT as exc:
            # The model endpoint is down or overloaded: Temporal retries the turn with backoff.
            raise ModelUnavailableError(
                f"the agent {self.agent.name!r}'s model is unavailable: {exc}",
                agent=self.agent.name,
            ) from exc
        except Exception as exc:
            # Whatever the run raised (a tool, a guardrail, a handoff, the model), nothing was
            # stored: the session's writes were only buffered. Temporal does not retry it.
            raise AgentRunError(
                f"the agent {self.agent.name!r} failed in turn {request.turn_id}: "
                f"{type(exc).__name__}: {exc}",
                agent=self.agent.name,
            ) from exc
        usage = result.context_wrapper.usage
        final = result.final_output
        text = final if isinstance(final, str) else _json_text(final)
        return AgentTurnOutcome(
            messages=session.added,
            reply=Message(role="assistant", content=text or "(no output)"),
            usage=TokenUsage(
                prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens
            ),
            context_tokens=session.context_tokens,
        )


async def _run_streamed(
    agent: Agent[Any],
    run_input: str | list[Any],
    session: TurnBoundSession,
    turn: OpenAIAgentTurn,
    on_text: Callable[[str], None],
) -> Any:
    """``Runner.run_streamed``, its text deltas handed to ``on_text``; the finished result.
    An error of the run is raised by the event stream, as ``Runner.run`` raises it."""
    result = Runner.run_streamed(
        agent, run_input, session=session, run_config=turn.run_config, max_turns=turn.max_turns
    )
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            on_text(event.data.delta)
    return result


def _json_text(value: Any) -> str:
    """A structured final output (a pydantic model, a dataclass-like dict) as JSON text."""
    dump = getattr(value, "model_dump", None)
    return json.dumps(dump(mode="json") if callable(dump) else value, ensure_ascii=False)
