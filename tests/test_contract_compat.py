"""Payloads earlier releases wrote (workflow histories, turn records in SQL) still decode."""

from __future__ import annotations

from statecore.contract._activities import CommitTurnInput, CommitTurnResult, ModelOutcome
from statecore.contract._session import TurnCheckpoint

EARLIER_RECORD = {
    "turn": 3,
    "duplicate": False,
    "first_seq": 5,
    "last_seq": 6,
    "message_count": 6,
    "token_total": 120,
    "window_tokens": 120,
    "state_version": None,
    "result": {
        "reply": {
            "role": "assistant",
            "content": "done",
            "tool_calls": [],
            "name": None,
            "tool_call_id": None,
            "metadata": {},
        },
        "usage": {"prompt_tokens": 100, "completion_tokens": 20},
        "context_tokens": 100,
    },
}


def test_a_turn_record_with_a_model_outcome_decodes_to_the_typed_outcome() -> None:
    record = CommitTurnResult.model_validate(EARLIER_RECORD)
    assert isinstance(record.result, ModelOutcome)
    assert record.result.reply.content == "done"
    assert record.result.context_tokens == 100
    assert record.result.usage.prompt_tokens == 100


def test_an_empty_outcome_from_earlier_releases_means_none() -> None:
    record = CommitTurnResult.model_validate({**EARLIER_RECORD, "result": {}})
    assert record.result is None
    commit = CommitTurnInput.model_validate(
        {"ref": {"agent_id": "a", "session_id": "s"}, "turn_id": "t", "turn": 1, "result": {}}
    )
    assert commit.result is None


def test_counters_keep_their_json_names() -> None:
    record = CommitTurnResult.model_validate(EARLIER_RECORD)
    dumped = record.model_dump(mode="json")
    for name in ("last_seq", "message_count", "token_total", "window_tokens"):
        assert dumped[name] == EARLIER_RECORD[name]
    checkpoint = TurnCheckpoint()
    checkpoint.take_counters(record)
    assert (checkpoint.last_seq, checkpoint.token_total) == (6, 120)
