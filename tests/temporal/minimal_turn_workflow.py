"""The smallest user workflow on the turn API: one turn, no explicit session opening."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from statecore.core._models import Message, SessionRef
from statecore.workflow import TurnSession


@workflow.defn(name="MinimalTurnAgent")
class MinimalTurnAgent:
    @workflow.run
    async def run(self, request: dict[str, Any]) -> str:
        ref = SessionRef(agent_id=request["agent_id"], session_id=request["session_id"])
        session = TurnSession(ref)
        async with session.turn("only-turn") as turn:
            turn.append(Message(role="user", content=request["content"]))
            out = await turn.respond()
        return out.message.content
