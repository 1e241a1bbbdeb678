"""The operator contract's control operations for a workflow built on the turn API.

``TurnSession.reset`` and ``TurnSession.compact`` run the same activities an AgentSession
runs for its ``reset`` and ``compact`` operations, with the same inputs (``ResetInput``,
``CompactInput``) and the same refusals, so a workflow of your own can clear or compact its
own session without starting an AgentSession for it. Each is one local activity and one
transaction; the change feed records it as a ``reset`` or ``compaction`` event.

Call them between turns, never inside an open ``async with session.turn(...)`` block: a
turn's buffered changes were made against the state it read, and a reset in between would
have them commit onto state they never saw, so both refuse with SessionState then.

Sandbox-safe: temporalio and statecore's pure models only.
"""

from __future__ import annotations

from typing import Any, Protocol

from statecore.contract._activities import ACT_COMPACT, ACT_RESET, ControlInput, ControlResult
from statecore.contract._session import CompactInput, ResetInput
from statecore.core._errors import SessionStateError
from statecore.core._models import SessionRef, StateOperationResult
from statecore.core._profile import SessionProfile
from statecore.workflow._activity_calls import bad_input, checked


class TurnSession(Protocol):
    """What the control operations need of ``statecore.workflow.TurnSession`` (a Protocol,
    so the turn API and its control operations do not import each other)."""

    ref: SessionRef
    profile: SessionProfile
    model: str
    turn_number: int
    open_turns: int

    async def run_sql(self, name: str, arg: Any, result_type: Any) -> Any: ...


async def reset_session(
    session: TurnSession, request: ResetInput | None, fields: dict[str, Any]
) -> StateOperationResult:
    """Clear the stores ``request`` names (or ``stores=[...]`` / ``all=True``) of the
    session; the turn numbering goes on where it was."""
    wanted = request if request is not None else checked(lambda: ResetInput(**fields))
    _between_turns(session, "reset")
    out: ControlResult = await session.run_sql(
        ACT_RESET, ControlInput(ref=session.ref, stores=wanted.store_names or []), ControlResult
    )
    _settle(session, out)
    return out.report


async def compact_session(
    session: TurnSession, request: CompactInput | None, fields: dict[str, Any]
) -> StateOperationResult:
    """Compact the session's context window as ``request`` asks (``strategy``,
    ``max_tokens``, ``max_messages``); ``summarize`` calls the session's model."""
    wanted = request if request is not None else checked(lambda: CompactInput(**fields))
    _between_turns(session, "compact")
    out: ControlResult = await session.run_sql(
        ACT_COMPACT,
        ControlInput(ref=session.ref, compact=wanted, profile=session.profile, model=session.model),
        ControlResult,
    )
    _settle(session, out)
    return out.report


def _between_turns(session: TurnSession, what: str) -> None:
    if session.open_turns:
        raise bad_input(
            SessionStateError(
                f"{what} runs between turns: {session.open_turns} turn(s) of this session are "
                "open in this workflow; call it after the turn block ends"
            )
        )


def _settle(session: TurnSession, out: ControlResult) -> None:
    # Turn numbers never go backwards, even after a conversation reset.
    session.turn_number = max(session.turn_number, out.snapshot.turn)
