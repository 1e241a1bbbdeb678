"""A Google ADK agent as a statecore turn.

``ADKAgentTurn(agent)`` is a statecore ``AgentTurnRunner``: a turn's activity calls it in
place of a model, and it runs one ADK ``Runner`` invocation for the turn's new message on the
session as it was committed (``TurnBoundSessionService``). The run's events come back to the
activity as the turn's messages, and the session header and the ``app:``/``user:`` state they
change are written in the same transaction as the turn record (``store_writes``): a turn that
commits stores its events once, one that fails stores nothing. Register it with the plugin by
name: ``StatecorePlugin(agents={"support": adk_agent})``.

The ADK session of a statecore session is named as ``layout`` says: app = the agent id, user
and session id from the session id (``alice@chat-1``; ``chat-1`` is the user ``user``). The
agent sees the events from the session's window start on, so ``compact`` shortens what it
reads, as it does for statecore's own model.
"""

from __future__ import annotations

import time
from typing import Any

from google.adk.agents import BaseAgent
from google.adk.agents.run_config import RunConfig
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions import Session
from google.genai import types

from statecore.core._errors import AgentRunError, InvalidInputError, StatecoreError
from statecore.core._models import Message, SessionRef, TokenUsage
from statecore.integrations.google_adk._events import readable_text
from statecore.integrations.google_adk._layout import SessionHeader, adk_ids, read_header
from statecore.integrations.google_adk._reads import build_session, select_events, shared_state
from statecore.integrations.google_adk._turn_session import TurnBoundSessionService
from statecore.integrations.google_adk._writes import advance_header, messages_of, split_delta
from statecore.operations._agent_turns import AgentTurnOutcome, AgentTurnRequest
from statecore.store import StoreTransaction, run_transaction


class ADKAgentTurn:
    """Runs an ADK agent for one statecore turn (see the module docstring)."""

    def __init__(self, agent: BaseAgent, *, run_config: RunConfig | None = None) -> None:
        if not isinstance(agent, BaseAgent):
            raise ValueError(f"expected a google.adk agent, got {type(agent).__name__}")
        self.agent = agent
        self.run_config = run_config

    async def run_turn(self, request: AgentTurnRequest) -> AgentTurnOutcome:
        new = list(request.new_messages)
        if not new or any(m.role != "user" for m in new):
            raise InvalidInputError("an agent turn starts from the user's message(s)")
        ref = request.ref
        session, header, version = await run_transaction(
            request.store, lambda tx: _committed(tx, ref), read_only=True
        )
        service = TurnBoundSessionService(session)
        runner = Runner(app_name=session.app_name, agent=self.agent, session_service=service)
        message = types.Content(role="user", parts=[types.Part(text=m.content) for m in new])
        try:
            async for _ in runner.run_async(
                user_id=session.user_id,
                session_id=session.id,
                new_message=message,
                run_config=self.run_config,
            ):
                pass
        except StatecoreError:
            raise
        except Exception as exc:
            # Whatever the run raised (a tool, a callback, the model), nothing was stored:
            # the events were only buffered. Temporal does not retry it.
            raise AgentRunError(
                f"the ADK agent {self.agent.name!r} failed in turn {request.turn_id}: "
                f"{type(exc).__name__}: {exc}",
                agent=self.agent.name,
            ) from exc
        finally:
            await runner.close()
        events = service.added
        deltas = _combined_deltas(events)
        messages = messages_of(events)

        async def store_writes(tx: StoreTransaction) -> None:
            await advance_header(tx, ref, header, version, events, deltas)

        return AgentTurnOutcome(
            messages=messages,
            reply=_reply(events),
            usage=_usage(events),
            store_writes=store_writes,
        )


async def _committed(
    tx: StoreTransaction, ref: SessionRef
) -> tuple[Session, SessionHeader, int | None]:
    """The session as committed (its events from the window start on), its header and the
    header's version (None: no turn has run yet, the header is created with the first)."""
    app_name, user_id, _ = adk_ids(ref)
    found = await read_header(tx, ref)
    if found is not None and found[0].user_id != user_id:
        raise InvalidInputError(f"session {ref} belongs to another ADK user")
    if found is None:
        now = time.time()
        header, version = (
            SessionHeader(user_id=user_id, state={}, create_time=now, update_time=now),
            None,
        )
    else:
        header, version = found
    info = await tx.sessions.get(ref)
    start = info.window_start_seq if info is not None else 1
    stored = await tx.conversation.messages(ref, from_seq=start)
    app_state, user_state = await shared_state(tx, ref.namespace, app_name, user_id)
    events = select_events(stored, None)
    if start > 1:
        # A compacted window may begin inside an exchange (a function result whose call is
        # before it): the agent's history starts at the first user event in the window.
        first_user = next((n for n, e in enumerate(events) if e.author == "user"), len(events))
        events = events[first_user:]
    session = build_session(ref, header, version or 0, events, app_state, user_state)
    return session, header, version


def _combined_deltas(events: list[Event]) -> dict[str, dict[str, Any]]:
    combined: dict[str, dict[str, Any]] = {"app": {}, "user": {}, "session": {}}
    for event in events:
        deltas = split_delta(dict(event.actions.state_delta or {}), "state_delta")
        for scope, delta in deltas.items():
            combined[scope].update(delta)
    return combined


def _reply(events: list[Event]) -> Message:
    """The newest text an agent said in this run (the final response)."""
    for event in reversed(events):
        if event.author == "user" or event.content is None or not event.content.parts:
            continue
        texts = [p.text for p in event.content.parts if p.text and not p.thought]
        if texts:
            return Message(role="assistant", content="".join(texts), name=event.author)
    last = events[-1] if events else None
    return Message(role="assistant", content=readable_text(last) if last else "(no output)")


def _usage(events: list[Event]) -> TokenUsage:
    prompt = completion = 0
    for event in events:
        meta = event.usage_metadata
        if meta is not None:
            prompt += meta.prompt_token_count or 0
            completion += meta.candidates_token_count or 0
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion)
