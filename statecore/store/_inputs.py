"""Input checks every storage backend applies before it writes anything.

The contract promises that bad input raises a typed ``statecore.core._errors`` error and leaves the
stored rows unchanged, on every backend. Keeping the checks (and the JSON encoding whose size
the limits are measured on) in one backend-independent module is what makes "1 MiB" or
"limit 1..1000" mean the same thing in memory, SQLite, PostgreSQL and MariaDB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from statecore.core._errors import (
    ContentTooLargeError,
    InvalidInputError,
    InvalidLimitError,
    NotFoundError,
    StatecoreError,
    StateTooLargeError,
    VersionConflictError,
    validation_message,
)
from statecore.core._limits import (
    MAX_COUNTER,
    MAX_INLINE_VALUE_BYTES,
    MAX_KV_VALUE_BYTES,
    MAX_PAGE_SIZE,
    MAX_RECENT_TOOLS,
    MAX_STATE_BYTES,
    MAX_TOKEN_BUDGET,
    MAX_TOKENS_PER_CALL,
    MAX_TTL_SECONDS,
    MAX_TURN_MESSAGES,
)
from statecore.core._models import (
    FlowCheckpoint,
    Hint,
    KVEntry,
    KVScope,
    Message,
    OrchestrationUpdate,
    ScopedState,
    SessionRef,
    StoredMessage,
    Summary,
    check_utf8_size,
    reject_nul,
    validate_identifier,
    validate_key,
    validate_text,
    validate_turn_id,
)

_M = TypeVar("_M", bound=BaseModel)


# --- numbers -----------------------------------------------------------------------------------


def check_int(value: Any, what: str, *, minimum: int = 0, maximum: int = MAX_COUNTER) -> int:
    """An integer in ``minimum..maximum`` (bool is not an integer here), else InvalidLimitError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidLimitError(f"{what} must be an integer, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidLimitError(
            f"{what} is {value}; it must be between {minimum} and {maximum}", value=value
        )
    return value


def check_token_usage(ref: Any, prompt_tokens: Any, completion_tokens: Any) -> None:
    """The arguments of ``add_token_usage``/``count_token_usage``: a session and one call's
    token counts."""
    check_ref(ref)
    check_int(prompt_tokens, "prompt_tokens", maximum=MAX_TOKENS_PER_CALL)
    check_int(completion_tokens, "completion_tokens", maximum=MAX_TOKENS_PER_CALL)


def check_flag(value: Any, what: str) -> bool:
    """A bool, else InvalidInputError (a truthy string must not switch behaviour)."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{what} must be true or false, got {type(value).__name__}")
    return value


def check_page_limit(limit: Any, what: str = "limit") -> int:
    """A page size: 1..MAX_PAGE_SIZE."""
    return check_int(limit, what, minimum=1, maximum=MAX_PAGE_SIZE)


def check_token_budget(max_tokens: Any) -> int:
    return check_int(max_tokens, "max_tokens", minimum=1, maximum=MAX_TOKEN_BUDGET)


def check_ttl_seconds(ttl: Any, what: str = "ttl_seconds", *, integral: bool = True) -> float:
    """A time-to-live: positive, finite, at most MAX_TTL_SECONDS."""
    if integral:
        return check_int(ttl, what, minimum=1, maximum=MAX_TTL_SECONDS)
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise InvalidLimitError(f"{what} must be a number of seconds")
    if not math.isfinite(ttl) or not 0 < ttl <= MAX_TTL_SECONDS:
        raise InvalidLimitError(
            f"{what} is {ttl}; it must be more than 0 and at most {MAX_TTL_SECONDS}", value=ttl
        )
    return float(ttl)


# --- references and times ----------------------------------------------------------------------


def check_ref(ref: Any) -> SessionRef:
    """A SessionRef whose ids are valid (also when it was built without validation)."""
    if not isinstance(ref, SessionRef):
        raise InvalidInputError(f"expected a SessionRef, got {type(ref).__name__}")
    validate_identifier(ref.namespace, "namespace")
    validate_identifier(ref.agent_id, "agent_id")
    validate_identifier(ref.session_id, "session_id")
    return ref


def check_scope(scope: Any) -> KVScope:
    if not isinstance(scope, KVScope):
        raise InvalidInputError(f"expected a KVScope, got {type(scope).__name__}")
    return revalidate(KVScope, scope, "KV scope")


def check_aware(value: Any, what: str = "time") -> datetime:
    """A timezone-aware datetime, converted to UTC. Naive times are ambiguous: rejected."""
    if not isinstance(value, datetime):
        raise InvalidInputError(f"{what} must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInputError(f"{what} must be timezone-aware (use datetime.now(UTC))")
    return value.astimezone(UTC)


def revalidate(model: type[_M], value: Any, what: str) -> _M:
    """Validate ``value`` (a model instance or a mapping) as ``model`` afresh, so an instance
    built with ``model_construct`` cannot smuggle unchecked data into storage."""
    if isinstance(value, BaseModel):
        value = value.model_dump(warnings=False)
    elif not isinstance(value, Mapping):
        raise InvalidInputError(f"{what} must be a {model.__name__}, got {type(value).__name__}")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        problems = validation_message(exc, what=what, limit=None)
        raise InvalidInputError(f"invalid {what}: {problems}") from exc


# --- messages ----------------------------------------------------------------------------------


def check_message(message: Any) -> Message:
    """A fully validated message, including the fields pydantic alone does not police
    (NUL bytes and lone surrogates in names, ids, tool arguments and metadata)."""
    checked = revalidate(Message, message, "message")
    for what, text in (("name", checked.name), ("tool_call_id", checked.tool_call_id)):
        if text is not None:
            validate_text(text, what)
    for call in checked.tool_calls:
        validate_text(call.id, "tool call id")
        validate_text(call.name, "tool call name")
        validate_text(call.arguments, "tool call arguments")
    # Metadata rides with its message into every model call's context: it keeps the inline cap.
    encode_json(checked.metadata, "message metadata", MAX_INLINE_VALUE_BYTES, ContentTooLargeError)
    return checked


def check_messages(messages: Any) -> list[Message]:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidInputError("messages must be a sequence of Message")
    if len(messages) > MAX_TURN_MESSAGES:
        raise InvalidLimitError(f"a turn may carry at most {MAX_TURN_MESSAGES} messages")
    return [check_message(m) for m in messages]


# --- JSON documents ----------------------------------------------------------------------------


def encode_json(
    value: Any, what: str, limit: int, too_large: type[StatecoreError] = ContentTooLargeError
) -> str:
    """Canonical JSON text of ``value`` (compact, UTF-8), checked against ``limit`` bytes.

    This is the serialisation every backend stores and measures, so a size limit is the same
    number of bytes everywhere."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"{what} is not JSON-serialisable: {exc}") from exc
    # After dumps, which has ruled out reference cycles the walk could not leave. (U+0000:
    # one rule everywhere, the same the request models apply before a turn starts.)
    reject_nul(value, what)
    check_utf8_size(
        text,
        what,
        limit=limit,
        measured_as=" serialised as JSON",
        too_large=too_large,
        advice="Store large data elsewhere and keep a reference",
    )
    return text


def encode_state(state: Any, what: str = "state") -> str:
    """A scoped-state or flow document: a JSON object of at most MAX_STATE_BYTES."""
    if not isinstance(state, Mapping):
        raise InvalidInputError(f"{what} must be a JSON object (dict), got {type(state).__name__}")
    return encode_json(state, what, MAX_STATE_BYTES, StateTooLargeError)


def encode_kv_value(value: Any) -> tuple[str, bytes | str]:
    """``("bytes", raw)`` for bytes-like values, else ``("json", text)``; at most 16 MiB."""
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        if len(raw) > MAX_KV_VALUE_BYTES:
            raise ContentTooLargeError(
                f"KV value is {len(raw)} bytes; the limit is {MAX_KV_VALUE_BYTES}",
                size=len(raw),
                limit=MAX_KV_VALUE_BYTES,
            )
        return "bytes", raw
    return "json", encode_json(value, "KV value", MAX_KV_VALUE_BYTES)


def decode_json(text: str) -> Any:
    return json.loads(text)


def checked_turn_id(ref: Any, turn_id: Any) -> str:
    check_ref(ref)
    return validate_identifier(turn_id, "turn_id")


def encode_turn_record(value: Any) -> str:
    """A turn record's stored text: any JSON value, capped at what a turn reads inline (a
    resent turn id returns it as an update's result, which history keeps)."""
    return encode_json(value, "turn record", MAX_INLINE_VALUE_BYTES)


# --- whole argument lists, checked the same way by every backend ---------------------------


def check_kv_key(scope: Any, bucket: Any, key: Any) -> None:
    """The address of one KV entry: a scope, a bucket name and a key."""
    check_scope(scope)
    validate_identifier(bucket, "bucket")
    validate_key(key)


@dataclass(frozen=True)
class KVPut:
    """A KV put's arguments once checked: the value encoded as it is stored."""

    kind: str
    payload: bytes | str
    ttl_seconds: float | None


def checked_kv_put(
    scope: Any, bucket: Any, key: Any, value: Any, expected_revision: Any, ttl_seconds: Any
) -> KVPut:
    check_kv_key(scope, bucket, key)
    kind, payload = encode_kv_value(value)
    if expected_revision is not None:
        check_int(expected_revision, "expected_revision")
    if ttl_seconds is not None:
        ttl_seconds = check_ttl_seconds(ttl_seconds, integral=False)
    return KVPut(kind, payload, ttl_seconds)


@dataclass(frozen=True)
class RestoredKV:
    """An exported KV entry, checked and encoded as ``kv.restore`` writes it."""

    bucket: str
    key: str
    kind: str
    payload: bytes | str
    revision: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None


def checked_kv_entries(entries: Any) -> list[RestoredKV]:
    """Arguments of ``kv.restore``: each entry validated afresh, its value encoded and of the
    kind it says, its times timezone-aware."""
    checked: list[RestoredKV] = []
    for item in entries:
        entry = revalidate(KVEntry, item, "KV entry")
        validate_identifier(entry.bucket, "bucket")
        validate_key(entry.key)
        kind, payload = encode_kv_value(entry.value)
        if kind != entry.kind:
            raise InvalidInputError(
                f"KV entry {entry.bucket}/{entry.key} says kind {entry.kind!r} but its "
                "value is not of that kind"
            )
        expires = entry.expires_at
        checked.append(
            RestoredKV(
                bucket=entry.bucket,
                key=entry.key,
                kind=kind,
                payload=payload,
                revision=entry.revision,
                created_at=check_aware(entry.created_at, "created_at"),
                updated_at=check_aware(entry.updated_at, "updated_at"),
                expires_at=None if expires is None else check_aware(expires, "expires_at"),
            )
        )
    return checked


def checked_flow_checkpoints(checkpoints: Any) -> list[tuple[FlowCheckpoint, str]]:
    """Arguments of ``flow.restore``: each checkpoint validated afresh, with its data as the
    JSON document stored; a (flow, version) given twice is refused."""
    checked: list[tuple[FlowCheckpoint, str]] = []
    seen: set[tuple[str, int]] = set()
    for item in checkpoints:
        cp = revalidate(FlowCheckpoint, item, "flow checkpoint")
        validate_identifier(cp.flow_id, "flow_id")
        validate_identifier(cp.step, "step")
        document = encode_state(cp.data, "flow data")
        if (cp.flow_id, cp.version) in seen:
            raise InvalidInputError(f"flow {cp.flow_id} version {cp.version} appears twice")
        seen.add((cp.flow_id, cp.version))
        cp = cp.model_copy(update={"created_at": check_aware(cp.created_at, "created_at")})
        checked.append((cp, document))
    return checked


def check_state_scope(namespace: Any, task_id: Any, agent_id: Any) -> None:
    """The (namespace, task_id, agent_id) of a scoped-state document."""
    validate_identifier(namespace, "namespace")
    validate_identifier(task_id, "task_id")
    validate_identifier(agent_id, "agent_id")


@dataclass(frozen=True)
class RestoredState:
    """An exported scoped-state document, checked and encoded as ``state.restore`` writes
    it."""

    namespace: str
    task_id: str
    agent_id: str
    document: str
    version: int
    created_at: datetime
    updated_at: datetime


def checked_states(states: Any) -> list[RestoredState]:
    """Arguments of ``state.restore``: each document validated afresh and encoded, its times
    timezone-aware."""
    checked: list[RestoredState] = []
    for item in states:
        state = revalidate(ScopedState, item, "scoped state")
        check_state_scope(state.namespace, state.task_id, state.agent_id)
        checked.append(
            RestoredState(
                namespace=state.namespace,
                task_id=state.task_id,
                agent_id=state.agent_id,
                document=encode_state(state.state),
                version=state.version,
                created_at=check_aware(state.created_at, "created_at"),
                updated_at=check_aware(state.updated_at, "updated_at"),
            )
        )
    return checked


def check_message_range(ref: Any, from_seq: Any, to_seq: Any, limit: Any) -> None:
    """Arguments of ``conversation.messages``."""
    check_ref(ref)
    if from_seq is not None:
        check_int(from_seq, "from_seq")
    if to_seq is not None:
        check_int(to_seq, "to_seq")
    if limit is not None:
        check_page_limit(limit)


def check_session_listing(namespace: Any, agent_id: Any, limit: Any, after: Any) -> None:
    """Arguments of ``sessions.list``: ``after`` must be a session of the listed namespace."""
    validate_identifier(namespace, "namespace")
    if agent_id is not None:
        validate_identifier(agent_id, "agent_id")
    check_page_limit(limit)
    if after is not None:
        check_ref(after)
        if after.namespace != namespace:
            raise InvalidInputError("after must be a session of the listed namespace")


def recent_tools(tools: list[str]) -> tuple[str, ...]:
    """Distinct tools, most recent last, at most MAX_RECENT_TOOLS (the oldest are dropped)."""
    ordered: list[str] = []
    for tool in tools:
        validate_identifier(tool, "tool")
        if tool in ordered:
            ordered.remove(tool)
        ordered.append(tool)
    return tuple(ordered[-MAX_RECENT_TOOLS:])


def checked_orchestration_update(update: Any) -> tuple[dict[str, Any], int | None]:
    """The columns an OrchestrationUpdate changes, checked, and its new TTL (None: keep)."""
    update = revalidate(OrchestrationUpdate, update, "orchestration update")
    changes: dict[str, Any] = {}
    if update.active_step is not None:
        changes["active_step"] = validate_identifier(update.active_step, "active_step")
    if update.recently_used_tools is not None:
        changes["recently_used_tools"] = recent_tools(update.recently_used_tools)
    if update.sequence_index is not None:
        changes["sequence_index"] = check_int(update.sequence_index, "sequence_index")
    if update.cumulative_token_usage is not None:
        usage = update.cumulative_token_usage
        changes["prompt_tokens"] = check_int(usage.prompt_tokens, "prompt_tokens")
        changes["completion_tokens"] = check_int(usage.completion_tokens, "completion_tokens")
    ttl = None
    if update.ttl_seconds is not None:
        ttl = int(check_ttl_seconds(update.ttl_seconds))
    return changes, ttl


class Versioned(Protocol):
    """Anything stored with a version number (a scoped-state row of either backend)."""

    @property
    def version(self) -> int: ...


VersionedT = TypeVar("VersionedT", bound=Versioned)


def check_state_version(
    current: VersionedT | None, expected_version: int | None, task_id: str, agent_id: str
) -> VersionedT:
    """``current``, once it is known to exist and to be at ``expected_version`` (None: any
    version); NotFoundError or VersionConflictError otherwise."""
    if current is None:
        raise NotFoundError(
            f"task {task_id} / agent {agent_id} has no state; create it first",
            task_id=task_id,
            agent_id=agent_id,
        )
    if expected_version is not None and expected_version != current.version:
        raise VersionConflictError(
            f"state of task {task_id} / agent {agent_id} is at version {current.version}, "
            f"not {expected_version}; read it again and reapply the change",
            current=current.version,
            expected=expected_version,
        )
    return current


def checked_append(
    ref: Any, turn_id: Any, messages: Any, start_index: Any, *, id_checked: bool = False
) -> list[Message]:
    """Arguments of ``conversation.append``: its messages, checked. A turn holds at most
    MAX_TURN_MESSAGES messages, counted from ``start_index``. ``id_checked``: the turn id
    was checked already in this transaction (by ``begin_turn``)."""
    check_ref(ref)
    if not id_checked:
        validate_turn_id(turn_id)
    check_int(start_index, "start_index", maximum=MAX_TURN_MESSAGES - 1)
    checked = check_messages(messages)
    if start_index + len(checked) > MAX_TURN_MESSAGES:
        raise InvalidLimitError(f"a turn may carry at most {MAX_TURN_MESSAGES} messages")
    return checked


def checked_flow_save(ref: Any, flow_id: Any, step: Any, data: Any) -> str:
    """Arguments of ``flow.save``: the checkpoint's data as the JSON document stored."""
    check_ref(ref)
    validate_identifier(flow_id, "flow_id")
    validate_identifier(step, "step")
    return encode_state(data, "flow data")


# --- restored conversations (bundle import), checked the same way by every backend -----------


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
        validate_turn_id(row.turn_id)
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


@dataclass(frozen=True)
class RestoreExtras:
    hints: list[Hint]
    summary: Summary | None
    system_prompt: str | None


def checked_restore_extras(
    restored_hints: Sequence[Hint],
    summary: Summary | None,
    system_prompt: str | None,
    last_seq: int,
) -> RestoreExtras:
    """Validate what ``restore`` writes besides the log."""
    checked_hints = [revalidate(Hint, h, "hint") for h in restored_hints]
    for hint in checked_hints:
        validate_text(hint.text, "hint", allow_empty=False)
        check_aware(hint.created_at, "hint created_at")
    if summary is not None:
        summary = revalidate(Summary, summary, "summary")
        validate_text(summary.text, "summary", allow_empty=False)
        check_aware(summary.created_at, "summary created_at")
        if summary.through_seq > last_seq:
            raise InvalidLimitError("summary.through_seq is past the last restored message")
    if system_prompt is not None:
        validate_text(system_prompt, "system prompt", allow_empty=False)
    return RestoreExtras(checked_hints, summary, system_prompt)
