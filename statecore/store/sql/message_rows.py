"""Conversion between messages and ``messages`` rows, and the checks on an imported log."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from statecore.core.errors import InvalidInputError
from statecore.core.models import Message, StoredMessage, validate_identifier
from statecore.store.inputs import check_aware, check_message, revalidate


def message_columns(message: Message) -> dict[str, Any]:
    """The content columns of a message (everything but its place in the log)."""
    return {
        "role": message.role,
        "content": message.content,
        "name": message.name,
        "tool_calls": (
            _dumps([call.model_dump() for call in message.tool_calls])
            if message.tool_calls
            else None
        ),
        "tool_call_id": message.tool_call_id,
        "metadata_json": _dumps(message.metadata) if message.metadata else None,
    }


def stored_columns(
    session_pk: int,
    message: Message,
    *,
    seq: int,
    turn_id: str,
    index: int,
    tokens: int,
    cumulative_tokens: int,
    created_at: datetime,
) -> dict[str, Any]:
    return {
        "session_pk": session_pk,
        "seq": seq,
        "turn_id": turn_id,
        "idx": index,
        "tokens": tokens,
        "cumulative_tokens": cumulative_tokens,
        "created_at": created_at,
        **message_columns(message),
    }


def stored_message(row: Row[Any] | dict[str, Any]) -> StoredMessage:
    """A StoredMessage from a ``messages`` row (or the dict that was inserted)."""
    r = row._mapping if isinstance(row, Row) else row
    return StoredMessage.model_validate(
        {
            "role": r["role"],
            "content": r["content"],
            "name": r["name"],
            "tool_calls": json.loads(r["tool_calls"]) if r["tool_calls"] else [],
            "tool_call_id": r["tool_call_id"],
            "metadata": json.loads(r["metadata_json"]) if r["metadata_json"] else {},
            "seq": r["seq"],
            "turn_id": r["turn_id"],
            "index": r["idx"],
            "tokens": r["tokens"],
            "cumulative_tokens": r["cumulative_tokens"],
            "created_at": r["created_at"],
        }
    )


def checked_log(messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    """An exported log, validated: ascending seqs, unique (turn_id, index), aware times, and
    strictly ascending cumulative token totals (the window query relies on that order)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidInputError("messages must be a sequence of StoredMessage")
    log: list[StoredMessage] = []
    seen: set[tuple[str, int]] = set()
    for message in messages:
        row = revalidate(StoredMessage, message, "stored message")
        check_message(row.model_dump(include=set(Message.model_fields)))
        validate_identifier(row.turn_id, "turn_id")
        row = row.model_copy(update={"created_at": check_aware(row.created_at, "created_at")})
        if log and row.seq <= log[-1].seq:
            raise InvalidInputError("restored messages must have strictly ascending seq")
        if log and row.cumulative_tokens <= log[-1].cumulative_tokens:
            raise InvalidInputError(
                "restored messages must have strictly ascending cumulative_tokens"
            )
        if (row.turn_id, row.index) in seen:
            raise InvalidInputError(f"turn {row.turn_id} index {row.index} appears twice")
        seen.add((row.turn_id, row.index))
        log.append(row)
    return log


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
