"""What each kind of committed change records in the change feed (ids and sizes only).

Each function runs inside the transaction that commits the change, as its last step: the
feed's numbering holds a per-namespace row lock until commit, so taking it last keeps that
hold short and never waits for it while holding a session's locks in another order.
"""

from __future__ import annotations

from collections.abc import Sequence

from statecore.contract._activities import CommitTurnInput
from statecore.core._change_events import NewEvent, json_bytes
from statecore.core._models import SessionRef, StoredMessage
from statecore.operations._shares import share_id_of
from statecore.store._base import StoreTransaction


async def record(tx: StoreTransaction, namespace: str, events: Sequence[NewEvent]) -> int:
    """Append ``events`` to the namespace's feed, in ``tx``; returns the first number."""
    return await tx.events.append(namespace, events)


def turn_events(
    commit: CommitTurnInput, stored: Sequence[StoredMessage], state_version: int | None
) -> list[NewEvent]:
    """The events of one committed turn: one per kind of change it made.

    The model call's token usage rides on the ``messages`` event (as ``usage_tokens``) when
    the turn stored messages, so a plain chat turn writes one event, not two: every event is
    a row with its indexes, and the feed is part of each turn's SQL bytes. An
    ``orchestration`` event is then written only when the step or tools moved (or when a
    turn used tokens but stored no message)."""
    ref, turn_id = commit.ref, commit.turn_id
    usage_tokens = commit.usage.total_tokens
    out: list[NewEvent] = []
    if stored:
        detail: dict[str, int] = {
            "first_seq": stored[0].seq,
            "last_seq": stored[-1].seq,
            "count": len(stored),
            "tokens": sum(m.tokens for m in stored),
            "bytes": sum(len(m.content.encode("utf-8")) for m in stored),
        }
        if usage_tokens:
            detail["usage_tokens"] = usage_tokens
        out.append(NewEvent.of("messages", ref, turn_id=turn_id, **detail))
    if commit.kv:
        out.append(
            NewEvent.of(
                "kv",
                ref,
                turn_id=turn_id,
                writes=[
                    {"op": op.op, "bucket": op.bucket, "key": op.key, "bytes": json_bytes(op.value)}
                    for op in commit.kv[:20]
                ],
                count=len(commit.kv),
            )
        )
    if commit.state is not None:
        out.append(
            NewEvent.of(
                "state",
                ref,
                turn_id=turn_id,
                task_id=ref.session_id,
                version=state_version,
                bytes=json_bytes(commit.state.state),
            )
        )
    if commit.flow:
        out.append(
            NewEvent.of(
                "flow",
                ref,
                turn_id=turn_id,
                checkpoints=[{"flow_id": f.flow_id, "step": f.step} for f in commit.flow[:20]],
                count=len(commit.flow),
            )
        )
    orch = commit.orchestration
    moved = orch is not None and bool(
        orch.set_active_step or orch.used_tools or orch.advance_sequence
    )
    if moved or (usage_tokens and not stored):
        out.append(
            NewEvent.of(
                "orchestration",
                ref,
                turn_id=turn_id,
                tokens=usage_tokens,
                tools=len(orch.used_tools) if orch else 0,
            )
        )
    shares = commit.shares
    if shares is not None and not shares.empty():
        out.append(
            NewEvent.of(
                "share",
                ref,
                turn_id=turn_id,
                granted=[
                    {"share_id": share_id_of(g.token), "kind": g.kind, "access": g.access}
                    for g in shares.grants
                ],
                revoked=[r.share_id for r in shares.revokes],
                wrote=[
                    {"share_id": share_id_of(w.token), "op": w.op}
                    for w in shares.writes
                    if w.op != "use"
                ],
            )
        )
    return out


def session_event(kind: str, ref: SessionRef, **detail: object) -> NewEvent:
    """One event about a whole session (reset, compaction, expiry, import, hint)."""
    return NewEvent.of(kind, ref, **detail)  # type: ignore[arg-type]
