"""A committed turn's record: what deduplication needs, and no second copy of the reply.

The reply of a model call is stored once, as a message of the turn. Its record keeps the
turn's counters, the usage and context size of the call, and where the reply sits in the log;
a duplicate send rebuilds the reply from that message. A turn whose reply is not among its
stored messages (an integration that commits it elsewhere) keeps the reply in the record.

A record is written once per turn and read only when the same turn id comes again, so it is
stored as a short JSON array rather than an object with field names::

    [turn, last_seq, last_seq - first_seq, token_total, window_tokens,
     outcome, last_seq - message_count, state_version]

    outcome: [prompt_tokens, completion_tokens, context_tokens, reply]
    reply:   left out when the reply is message ``last_seq``; else its seq, or the message
             itself when the log does not hold it

Counters are kept as distances from ``last_seq`` where those are nearly always small or zero,
and trailing items at their default (0, or null for no outcome / no state version) are left
out: a model call's turn is about 30 bytes. Records written as JSON objects (before this
layout: ``result.reply_seq``, and before that ``result.reply``) read as before; export bundles
carry records in that object layout (``expanded_record``).
"""

from __future__ import annotations

from typing import Any

from statecore.contract._activities import CommitTurnResult, ModelOutcome
from statecore.core._errors import InvalidInputError, NotFoundError
from statecore.core._models import Message, SessionRef, StoredMessage
from statecore.store._base import StoreTransaction

#: Each item's value when it is left out at the end of a record, and of its outcome.
_RECORD_DEFAULTS: tuple[Any, ...] = (None, 0, 0, 0, 0, None, 0, None)
_OUTCOME_DEFAULTS: tuple[Any, ...] = (0, 0, 0, None)


def _trimmed(items: list[Any], defaults: tuple[Any, ...]) -> list[Any]:
    while items and items[-1] == defaults[len(items) - 1]:
        items.pop()
    return items


def record_value(result: CommitTurnResult, stored: list[StoredMessage]) -> list[Any]:
    """The record stored for ``result``, whose messages are ``stored``. Everything but
    ``duplicate`` (a record read back is one) and a reply the log holds is kept."""
    last = result.last_seq
    outcome: list[Any] | None = None
    if result.result is not None:
        done = result.result
        reply_seq = _reply_seq(done.reply, stored)
        reply: Any
        if reply_seq is None:
            reply = done.reply.model_dump(mode="json", exclude_defaults=True)
        else:
            reply = None if reply_seq == last else reply_seq
        outcome = _trimmed(
            [done.usage.prompt_tokens, done.usage.completion_tokens, done.context_tokens, reply],
            _OUTCOME_DEFAULTS,
        )
    items = [
        result.turn,
        last,
        last - result.first_seq,
        result.token_total,
        result.window_tokens,
        outcome,
        last - result.message_count,
        result.state_version,
    ]
    return _trimmed(items, _RECORD_DEFAULTS)


def expanded_record(value: Any) -> dict[str, Any]:
    """A stored record in the object layout (``result.reply_seq`` or ``result.reply``),
    whatever layout it was stored in: what bundles carry, and what ``read_record`` reads."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, list) or not value or len(value) > len(_RECORD_DEFAULTS):
        raise InvalidInputError(f"a turn record must be a JSON array or object, not {value!r}")
    items = [*value, *_RECORD_DEFAULTS[len(value) :]]
    turn, last, first_gap, token_total, window_tokens, outcome, count_gap, state_version = items
    data: dict[str, Any] = {
        "turn": turn,
        "first_seq": last - first_gap,
        "last_seq": last,
        "message_count": last - count_gap,
        "token_total": token_total,
        "window_tokens": window_tokens,
    }
    if state_version is not None:
        data["state_version"] = state_version
    if outcome is not None:
        if not isinstance(outcome, list) or len(outcome) > len(_OUTCOME_DEFAULTS):
            raise InvalidInputError(f"a turn record's outcome must be a short array: {outcome!r}")
        prompt, completion, context, reply = [*outcome, *_OUTCOME_DEFAULTS[len(outcome) :]]
        slim: dict[str, Any] = {
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
            "context_tokens": context,
        }
        if isinstance(reply, dict):
            slim["reply"] = reply
        else:
            slim["reply_seq"] = last if reply is None else reply
        data["result"] = slim
    return data


_RECORD_FIELDS = frozenset(
    {"turn", "first_seq", "last_seq", "message_count", "token_total", "window_tokens"}
)


def compact_record(value: Any) -> Any:
    """A record in the object layout as the array ``record_value`` writes, when it says
    nothing the array cannot (anything else is returned as it is, and reads as before)."""
    if not isinstance(value, dict) or not {"turn", "first_seq"} <= value.keys():
        return value
    if not value.keys() <= _RECORD_FIELDS | {"state_version", "result", "duplicate"}:
        return value
    counters = {name: value.get(name, 0) for name in _RECORD_FIELDS}
    state_version = value.get("state_version")
    if not all(type(n) is int for n in counters.values()) or not (
        state_version is None or type(state_version) is int
    ):
        return value
    outcome = _compact_outcome(value.get("result"), counters["last_seq"])
    if outcome is False:
        return value
    last = counters["last_seq"]
    items = [
        counters["turn"],
        last,
        last - counters["first_seq"],
        counters["token_total"],
        counters["window_tokens"],
        outcome,
        last - counters["message_count"],
        state_version,
    ]
    return _trimmed(items, _RECORD_DEFAULTS)


def _compact_outcome(outcome: Any, last_seq: int) -> list[Any] | bool | None:
    """The outcome array of an object-layout ``result``; None for no outcome, False when
    it does not fit the array."""
    if outcome is None or outcome == {}:
        return None
    if not isinstance(outcome, dict) or not outcome.keys() <= {
        "usage",
        "context_tokens",
        "reply_seq",
        "reply",
    }:
        return False
    usage = outcome.get("usage", {})
    if not isinstance(usage, dict) or not usage.keys() <= {"prompt_tokens", "completion_tokens"}:
        return False
    numbers = [
        usage.get("prompt_tokens", 0),
        usage.get("completion_tokens", 0),
        outcome.get("context_tokens", 0),
    ]
    if not all(type(n) is int for n in numbers):
        return False
    if ("reply" in outcome) == ("reply_seq" in outcome):
        return False
    reply = outcome.get("reply")
    if reply is None:
        seq = outcome["reply_seq"]
        if type(seq) is not int:
            return False
        reply = None if seq == last_seq else seq
    elif not isinstance(reply, dict):
        return False
    return _trimmed([*numbers, reply], _OUTCOME_DEFAULTS)


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


async def read_record(tx: StoreTransaction, ref: SessionRef, value: Any) -> CommitTurnResult:
    """A stored record (either layout) as the duplicate result of its turn, the reply read
    from the log."""
    fields = expanded_record(value)
    data = {**fields, "duplicate": True}
    outcome = fields.get("result")
    if isinstance(outcome, dict) and "reply_seq" in outcome:
        seq = outcome["reply_seq"]
        found = await tx.conversation.messages(ref, from_seq=seq, to_seq=seq)
        if not found:
            raise NotFoundError(
                f"turn {fields.get('turn')} of session {ref} points at reply message {seq}, "
                "which is not in the log; the log was changed outside statecore",
                turn=fields.get("turn"),
                seq=seq,
            )
        rest = {k: v for k, v in outcome.items() if k != "reply_seq"}
        data["result"] = ModelOutcome.model_validate(
            {**rest, "reply": _as_message(found[0]).model_dump()}
        )
    return CommitTurnResult.model_validate(data)
