"""Conversion between messages and ``messages`` rows, and the checks on an imported log."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from statecore.core._models import Message, StoredMessage, ToolCall
from statecore.core._prechecked import prechecked
from statecore.store.sql._prebuilt_statements import DirectRow

_TOOL_CALL_FIELDS = ToolCall.model_fields.keys()


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


def stored_message(row: Row[Any] | DirectRow | dict[str, Any]) -> StoredMessage:
    """A StoredMessage from a ``messages`` row (or the dict that was inserted).

    Rows are written only from validated messages (``append``, ``restore``), and a turn
    reads its whole window back on every turn, so they are not validated again here."""
    r = row._mapping if isinstance(row, (Row, DirectRow)) else row
    return prechecked(
        StoredMessage,
        {
            "role": r["role"],
            "content": r["content"],
            "name": r["name"],
            "tool_calls": _tool_calls(r["tool_calls"]) if r["tool_calls"] else [],
            "tool_call_id": r["tool_call_id"],
            "metadata": json.loads(r["metadata_json"]) if r["metadata_json"] else {},
            "seq": r["seq"],
            "turn_id": r["turn_id"],
            "index": r["idx"],
            "tokens": r["tokens"],
            "cumulative_tokens": r["cumulative_tokens"],
            "created_at": r["created_at"],
        },
    )


def _tool_calls(text: str) -> list[ToolCall]:
    calls = json.loads(text)
    # Written by ``message_columns`` with every field; anything else is validated.
    return [
        prechecked(ToolCall, call)
        if isinstance(call, dict) and call.keys() == _TOOL_CALL_FIELDS
        else ToolCall.model_validate(call)
        for call in calls
    ]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
