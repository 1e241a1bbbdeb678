"""Models built from already-valid values without validating them again behave like
validated ones: equal, dumped and copied the same."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from statecore.core._models import Message, StoredMessage, ToolCall
from statecore.core._prechecked import prechecked
from statecore.store.sql._message_rows import stored_columns, stored_message

CALL = {"id": "c1", "name": "weather", "arguments": '{"city": "Oslo"}'}


def _row(tool_calls: str | None) -> dict[str, object]:
    message = Message(role="assistant", content="let me look", tool_calls=[ToolCall(**CALL)])
    row = stored_columns(
        7,
        message,
        seq=3,
        turn_id="t-1",
        index=1,
        tokens=12,
        cumulative_tokens=40,
        created_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
    )
    return {**row, "tool_calls": tool_calls}


def test_a_trusted_message_equals_the_validated_one() -> None:
    values = {
        "role": "user",
        "content": "hi",
        "name": None,
        "tool_calls": [],
        "tool_call_id": None,
        "metadata": {"k": 1},
    }
    built = prechecked(Message, dict(values))
    checked = Message.model_validate(values)
    assert built == checked
    assert built.model_dump_json() == checked.model_dump_json()
    assert built.model_copy(update={"content": "x"}).content == "x"


def test_a_stored_row_reads_back_as_the_validated_message() -> None:
    row = _row('[{"id":"c1","name":"weather","arguments":"{\\"city\\": \\"Oslo\\"}"}]')
    read = stored_message(row)
    expected = StoredMessage.model_validate(
        {
            "role": "assistant",
            "content": "let me look",
            "tool_calls": [CALL],
            "seq": 3,
            "turn_id": "t-1",
            "index": 1,
            "tokens": 12,
            "cumulative_tokens": 40,
            "created_at": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        }
    )
    assert read == expected
    assert read.tool_calls[0] == ToolCall(**CALL)


def test_a_tool_call_not_written_by_statecore_is_validated() -> None:
    # A row edited by hand (a field missing): validated, so it fails loudly, not later.
    with pytest.raises(ValueError, match="name"):
        stored_message(_row('[{"id":"c1"}]'))
