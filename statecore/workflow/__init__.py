"""The turn API, for use inside any Temporal workflow (sandbox-safe).

::

    session = TurnSession(SessionRef(agent_id="planner", session_id=sid))
    async with session.turn(turn_id) as turn:
        turn.append(Message(role="user", content=text))
        reply = await turn.respond()

See ``statecore.workflow._turn`` for the contract.
"""

from statecore.workflow._buffers import TurnFlow, TurnKV, TurnState
from statecore.workflow._shares import SharedKV, SharedState, TurnShares
from statecore.workflow._turn import Turn, TurnSession

__all__ = [
    "SharedKV",
    "SharedState",
    "Turn",
    "TurnFlow",
    "TurnKV",
    "TurnSession",
    "TurnShares",
    "TurnState",
]
