"""What an AgentSession shows of itself: its reports, its search attributes and the current
details the Temporal UI displays. Pure functions of the session's checkpoint and input, plus
the search attributes' record of what was last written (every upsert is a history event)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate

from statecore.contract._session import (
    SA_AGENT_ID,
    SA_SESSION_ID,
    SA_STATUS,
    SA_TURN,
    TURN_SEARCH_ATTRIBUTE_EVERY,
    Rejection,
    SessionInput,
    SessionReport,
    TurnCheckpoint,
)
from statecore.core._models import StateOperationResult, StateStoreReport

#: A committed turn used to upsert StatecoreTurn every time; now only the first turn and
#: every TURN_SEARCH_ATTRIBUTE_EVERY-th do (status changes and new runs still write it).
PATCH_SPARSE_TURN_ATTRIBUTE = "statecore-sparse-turn-search-attribute"

_SA_KEYS: dict[str, SearchAttributeKey[Any]] = {
    SA_SESSION_ID: SearchAttributeKey.for_keyword(SA_SESSION_ID),
    SA_AGENT_ID: SearchAttributeKey.for_keyword(SA_AGENT_ID),
    SA_STATUS: SearchAttributeKey.for_keyword(SA_STATUS),
    SA_TURN: SearchAttributeKey.for_int(SA_TURN),
}


class SearchAttributes:
    """The session's search attributes, upserted only where they changed."""

    def __init__(self) -> None:
        #: What the run's search attributes hold now (read from the run's start first).
        self._written: dict[str, Any] = {}

    def sync(self, input: SessionInput, cp: TurnCheckpoint, *, after_turn: bool = False) -> None:
        """Upsert what changed. A turn alone moves StatecoreTurn only on the session's first
        turn and every TURN_SEARCH_ATTRIBUTE_EVERY turns; any other change writes the exact
        turn along with it."""
        wanted: dict[str, Any] = {
            SA_SESSION_ID: input.session_id,
            SA_AGENT_ID: input.agent_id,
            SA_STATUS: cp.status,
            SA_TURN: cp.turn,
        }
        if not self._written:
            current = workflow.info().typed_search_attributes
            for name, key in _SA_KEYS.items():
                value = current.get(key)
                if value is not None:
                    self._written[name] = value
        names = [name for name, value in wanted.items() if self._written.get(name) != value]
        # The patch is asked last: its marker is written only by a turn that skips its upsert.
        if (
            after_turn
            and names == [SA_TURN]
            and not self._turn_due(cp)
            and workflow.patched(PATCH_SPARSE_TURN_ATTRIBUTE)
        ):
            return
        changed: list[SearchAttributeUpdate[Any]] = [
            _SA_KEYS[name].value_set(wanted[name]) for name in names
        ]
        if changed:
            workflow.upsert_search_attributes(changed)
            self._written.update(wanted)

    def _turn_due(self, cp: TurnCheckpoint) -> bool:
        """Whether a committed turn writes StatecoreTurn: a session's first, so that
        ``StatecoreTurn > 0`` finds every session that has talked, and every
        TURN_SEARCH_ATTRIBUTE_EVERY-th."""
        return not self._written.get(SA_TURN) or cp.turn % TURN_SEARCH_ATTRIBUTE_EVERY == 0


def current_details(
    input: SessionInput,
    cp: TurnCheckpoint,
    answering: tuple[str, datetime] | None,
    rejections: Sequence[Rejection],
) -> str:
    """A short markdown status for the Temporal UI (costs no history)."""
    lines = [
        f"**{input.agent_id} / {input.session_id}** - {cp.status}",
        f"turn {cp.turn} - {cp.message_count} messages - {cp.token_total} tokens stored - "
        f"window {cp.window_tokens} tokens - run {cp.runs}",
    ]
    if cp.pause_reason and cp.status == "paused":
        lines.append(f"paused: {cp.pause_reason}")
    if cp.last_operation:
        lines.append(f"last: {cp.last_operation}")
    if answering is not None:
        turn_id, since = answering
        # The model call's attempts, its latest failure and the next attempt's time are
        # Temporal's own record of the pending activity, shown beside these details.
        lines.append(
            f"answering turn {turn_id} since {since:%H:%M:%S} UTC; a failing model call "
            "shows its attempt and error under Pending Activities"
        )
    if rejections:
        last = rejections[-1]
        lines.append(f"last rejection: {last.operation} - {last.code}: {last.message}")
    return "\n\n".join(lines)


def session_report(
    base: StateOperationResult,
    input: SessionInput,
    cp: TurnCheckpoint,
    rejections: Sequence[Rejection],
) -> SessionReport:
    """``base`` (an operation's result) as the session reports it: a describe's counters
    brought up to the checkpoint's, with the checkpoint and the recent rejections."""
    conversation = next((s for s in base.stores if s.name == "conversation"), None)
    if conversation is not None and base.operation == "describe":
        # The cached report is as fresh as the last control operation; the checkpoint's
        # counters are as fresh as the last turn.
        conversation.exists = cp.message_count > 0
        conversation.items = cp.message_count
        conversation.tokens = cp.token_total
        conversation.metadata["last_seq"] = cp.last_seq
        conversation.metadata["window_tokens"] = cp.window_tokens
        start = conversation.metadata.get("window_start_seq")
        if isinstance(start, int):  # moved only by control operations, which refresh it
            conversation.metadata["window_messages"] = max(0, cp.last_seq - start + 1)
    orchestration = next((s for s in base.stores if s.name == "orchestration"), None)
    # Every turn adds its usage to the orchestration row, and the checkpoint's usage is
    # that row's total (read at the run's start, plus each turn since).
    used = cp.usage.total_tokens
    if orchestration is not None and base.operation == "describe" and used:
        orchestration.exists = True
        orchestration.items = 1
        orchestration.tokens = used
    return SessionReport(
        **base.model_dump(exclude={"session_id", "namespace"}),
        session_id=input.session_id,
        namespace=input.namespace,
        agent_id=input.agent_id,
        checkpoint=cp.model_copy(deep=True),
        rejections=list(rejections),
    )


def stores_from_checkpoint(cp: TurnCheckpoint) -> list[StateStoreReport]:
    """The conversation's report as the checkpoint knows it, before any control operation
    has read the stores."""
    return [
        StateStoreReport(
            name="conversation",
            exists=cp.message_count > 0,
            items=cp.message_count,
            tokens=cp.token_total,
            metadata={"last_seq": cp.last_seq, "window_tokens": cp.window_tokens},
        )
    ]


def without_data(report: StateStoreReport) -> StateStoreReport:
    """A store's report with its counters only (what the describe query may cache)."""
    metadata = {k: v for k, v in report.metadata.items() if not k.startswith("data_")}
    return report.model_copy(update={"data": None, "metadata": metadata})
