"""A committed turn's record: what deduplication needs, and no second copy of the reply.

The reply of a model call is stored once, as a message of the turn. Its record keeps the
turn's counters, the usage and context size of the call, and ``reply_seq``, the reply's place
in the log; a duplicate send rebuilds the reply from that message. A turn whose reply is not
among its stored messages (an integration that commits it elsewhere) keeps the reply in the
record, and records written before this layout (``result.reply``) read as before.
"""

from __future__ import annotations

from typing import Any

from statecore.contract.activities import CommitTurnResult, ModelOutcome
from statecore.core.errors import NotFoundError
from statecore.core.models import Message, SessionRef, StoredMessage
from statecore.store.base import StoreTransaction


def record_value(result: CommitTurnResult, stored: list[StoredMessage]) -> dict[str, Any]:
    """The JSON a turn record stores for ``result``, whose messages are ``stored``.

    Every field of the result is kept except ``duplicate`` (a record read back is one) and
    the reply; fields at their default are left out, as reading restores them."""
    value: dict[str, Any] = result.model_dump(
        mode="json", exclude={"duplicate", "result"}, exclude_defaults=True
    )
    outcome = result.result
    if outcome is None:
        return value
    slim = outcome.model_dump(mode="json", exclude={"reply"}, exclude_defaults=True)
    reply_seq = _reply_seq(outcome.reply, stored)
    if reply_seq is None:
        slim["reply"] = outcome.reply.model_dump(mode="json", exclude_defaults=True)
    else:
        slim["reply_seq"] = reply_seq
    value["result"] = slim
    return value


def _reply_seq(reply: Message, stored: list[StoredMessage]) -> int | None:
    # The reply is the newest message a model call's commit stores; anything else keeps
    # its copy in the record rather than pointing at a message that is not the reply.
    for message in reversed(stored):
        if _as_message(message) == reply:
            return message.seq
    return None


def _as_message(stored: StoredMessage) -> Message:
    return Message.model_construct(
        role=stored.role,
        content=stored.content,
        name=stored.name,
        tool_calls=stored.tool_calls,
        tool_call_id=stored.tool_call_id,
        metadata=stored.metadata,
    )


async def read_record(
    tx: StoreTransaction, ref: SessionRef, value: dict[str, Any]
) -> CommitTurnResult:
    """A stored record as the duplicate result of its turn, the reply read from the log."""
    data = {**value, "duplicate": True}
    outcome = value.get("result")
    if isinstance(outcome, dict) and "reply_seq" in outcome:
        seq = outcome["reply_seq"]
        found = await tx.conversation.messages(ref, from_seq=seq, to_seq=seq)
        if not found:
            raise NotFoundError(
                f"turn {value.get('turn')} of session {ref} points at reply message {seq}, "
                "which is not in the log; the log was changed outside statecore",
                turn=value.get("turn"),
                seq=seq,
            )
        fields = {k: v for k, v in outcome.items() if k != "reply_seq"}
        data["result"] = ModelOutcome.model_validate(
            {**fields, "reply": _as_message(found[0]).model_dump()}
        )
    return CommitTurnResult.model_validate(data)
