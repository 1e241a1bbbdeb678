"""A Pydantic AI agent as a statecore turn.

``PydanticAIAgentTurn(agent)`` is a statecore ``AgentTurnRunner``: a turn's activity calls it in
place of a model, and it runs ``agent.run(<the turn's new message>, message_history=<the
session's context>)`` once. The history is the session's context as statecore assembles it
(system prompt, summary, hints and the newest messages that fit the profile's budget, a tool
call never split from its return), so a compacted session sends its summary rather than its
whole log. The run's new messages (the user's request as Pydantic AI records it, tool calls and
returns, the final response) come back to the activity, which commits them with the turn
record in one transaction, each stored as ``StatecoreConversationStore`` stores it. Only the
turn's input and its reply travel through Temporal's history: never the conversation, never the
agent's dependencies.

Register it with the plugin by name: ``StatecorePlugin(agents={"support": agent})``, or
``{"support": PydanticAIAgentTurn(agent, deps=...)}`` for an agent that takes dependencies.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.exceptions import (
    ModelConnectionError,
    ModelRateLimitError,
    ModelRequestTimeout,
    ModelServerError,
)
from pydantic_ai.exceptions import ModelUnavailableError as PydanticModelUnavailable
from pydantic_ai.messages import ModelMessage
from pydantic_core import to_json

from statecore.core._errors import (
    AgentRunError,
    InvalidInputError,
    ModelUnavailableError,
    StatecoreError,
)
from statecore.core._model_windows import context_budget
from statecore.core._models import Message, TokenUsage
from statecore.integrations.pydantic_ai._codec import (
    entry_id_of,
    entry_messages,
    to_model_messages,
)
from statecore.operations._agent_turns import AgentTurnOutcome, AgentTurnRequest
from statecore.operations._context_window import assemble_context
from statecore.store import StoreTransaction, run_transaction

#: What Pydantic AI raises when a retry later can succeed; anything else a run raises is the
#: turn's own failure.
_TRANSIENT = (
    ModelRateLimitError,
    PydanticModelUnavailable,
    ModelServerError,
    ModelConnectionError,
    ModelRequestTimeout,
)

#: Builds the run's dependencies for one turn (from its session, say).
DepsFactory = Callable[[AgentTurnRequest], Any]


class PydanticAIAgentTurn:
    """Runs ``agent`` for one statecore turn (see the module docstring).

    Args:
        agent: a ``pydantic_ai.Agent``.
        deps: the dependencies every run gets, or ``deps_factory`` to build them per turn.
            They stay in the worker: a turn's Temporal history never carries them.
        run_options: further keyword arguments for ``agent.run`` (``model_settings``,
            ``usage_limits``, ...).
        name: what errors call the agent (default: the agent's own name).
    """

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        deps: Any = None,
        deps_factory: DepsFactory | None = None,
        run_options: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise ValueError(f"expected a pydantic_ai.Agent, got {type(agent).__name__}")
        if deps is not None and deps_factory is not None:
            raise ValueError("pass deps or deps_factory, not both")
        self.agent = agent
        self.deps = deps
        self.deps_factory = deps_factory
        self.run_options = dict(run_options or {})
        self.name = name or agent.name or "agent"

    async def run_turn(self, request: AgentTurnRequest) -> AgentTurnOutcome:
        new = list(request.new_messages)
        if not new or any(m.role != "user" for m in new):
            raise InvalidInputError("an agent turn starts from the user's message(s)")
        history, parent_id, context_tokens = await run_transaction(
            request.store, lambda tx: _history(tx, request), read_only=True
        )
        prompt: str | Sequence[str] = new[0].content if len(new) == 1 else [m.content for m in new]
        deps = self.deps_factory(request) if self.deps_factory is not None else self.deps
        try:
            result = await self.agent.run(
                prompt, message_history=history, deps=deps, **self.run_options
            )
        except StatecoreError:
            raise
        except _TRANSIENT as exc:
            # The model endpoint is down or overloaded: Temporal retries the turn with backoff.
            raise ModelUnavailableError(
                f"the agent {self.name!r}'s model is unavailable: {exc}", agent=self.name
            ) from exc
        except Exception as exc:
            # A tool, an output validator, a usage limit or the model: nothing was stored
            # (the run's messages are only returned, never written). Temporal does not retry.
            raise AgentRunError(
                f"the agent {self.name!r} failed in turn {request.turn_id}: "
                f"{type(exc).__name__}: {exc}",
                agent=self.name,
            ) from exc
        usage = result.usage
        output = result.output
        text = output if isinstance(output, str) else to_json(output).decode()
        return AgentTurnOutcome(
            messages=_stored(result.new_messages(), parent_id),
            reply=Message(role="assistant", content=text or "(no output)"),
            usage=TokenUsage(
                prompt_tokens=usage.input_tokens or 0, completion_tokens=usage.output_tokens or 0
            ),
            context_tokens=context_tokens,
        )


async def _history(
    tx: StoreTransaction, request: AgentTurnRequest
) -> tuple[list[ModelMessage], str | None, int]:
    """The session's context before the turn as Pydantic AI messages, the entry the run's
    messages follow, and the context's tokens."""
    if await tx.sessions.get(request.ref) is None:
        return [], None, 0
    new = list(request.new_messages)
    context = await assemble_context(
        tx,
        request.ref,
        new,
        max_tokens=context_budget(request.profile.max_tokens, None),
        counter=request.counter,
    )
    before = context.messages[: len(context.messages) - len(new)]
    newest = await tx.conversation.tail(request.ref, max_messages=1)
    parent_id = entry_id_of(newest[-1]) if newest else None
    return to_model_messages(before), parent_id, context.tokens


def _stored(messages: Sequence[ModelMessage], parent_id: str | None) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        entry_id = str(uuid.uuid4())
        out.extend(entry_messages(entry_id, parent_id, message))
        parent_id = entry_id
    return out
