"""The data statecore stores and returns: pydantic models, validated on the way in.

These models cross every boundary (SQL rows are converted to them, Temporal payloads carry
them, bundles serialise them), so validation lives here once: identifiers, roles, content
size and encoding. Workflow code may import this module; it does no I/O.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from statecore.core._errors import (
    ContentTooLargeError,
    EmptyContentError,
    InvalidIdentifierError,
    InvalidInputError,
    StatecoreError,
)
from statecore.core._identifiers import validate_identifier as validate_identifier
from statecore.core._identifiers import validate_key as validate_key
from statecore.core._identifiers import validate_turn_id as validate_turn_id
from statecore.core._limits import DEFAULT_SESSION_TTL_SECONDS, MAX_MESSAGE_BYTES

# Re-exported: the identifier rules live in statecore.core._identifiers, one per kind.
from statecore.core._limits import MAX_ID_LENGTH as MAX_ID_LENGTH
from statecore.core._limits import MAX_KEY_LENGTH as MAX_KEY_LENGTH

# --- limits ------------------------------------------------------------------------------------

DEFAULT_NAMESPACE = "default"

#: Validation context for what statecore's workflow built from checked parts and hands to
#: its own activities (``model_validate_json(data, context=CARRIED)``): message text is not
#: scanned again on the way; the store checks what it writes.
CARRIED: dict[str, bool] = {"carried": True}


Role = Literal["system", "user", "assistant", "tool"]
SessionStatus = Literal["active", "paused", "draining", "closed"]
StoreName = Literal["conversation", "kv", "state", "flow", "orchestration", "tools", "task"]
ALL_STORES: tuple[str, ...] = (
    "conversation",
    "kv",
    "state",
    "flow",
    "orchestration",
    "tools",
    "task",
)


def validate_prefix(value: str) -> str:
    """A key prefix may be empty (list everything); otherwise it follows the key alphabet."""
    return value if value == "" else validate_key(value)


def reject_nul(value: Any, what: str) -> None:
    """Raise InvalidInputError if a string anywhere in a JSON value (keys included) holds a
    NUL character: PostgreSQL's jsonb cannot store U+0000, so no backend accepts it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise InvalidInputError(f"{what} contains a NUL character; remove it")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def validate_text(value: str, what: str = "content", *, allow_empty: bool = True) -> str:
    """Reject NUL bytes, lone surrogates (invalid UTF-8) and text over the message limit."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string")
    if not allow_empty and not value.strip():
        raise EmptyContentError(f"{what} is empty; send some text")
    if "\x00" in value:
        raise InvalidInputError(f"{what} contains a NUL byte; strip it before sending")
    check_message_size(value, what)
    return value


def check_message_size(text: str, what: str, *, measured_as: str = "") -> int:
    """The UTF-8 size of ``text``, or a typed error if it holds a lone surrogate or is over the
    message limit. ``measured_as`` says what was measured (" as JSON") in the error."""
    return check_utf8_size(
        text,
        what,
        limit=MAX_MESSAGE_BYTES,
        measured_as=measured_as,
        advice="Store large documents in KV or scoped state and send a reference",
    )


def check_utf8_size(
    text: str,
    what: str,
    *,
    limit: int,
    advice: str,
    measured_as: str = "",
    too_large: type[StatecoreError] = ContentTooLargeError,
) -> int:
    """The UTF-8 size of ``text``; ``InvalidInputError`` for a lone surrogate (which has no
    UTF-8 form) and ``too_large`` (with size, limit and ``advice``) over ``limit`` bytes."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{what} is not valid UTF-8 (lone surrogate)") from exc
    if size > limit:
        raise too_large(
            f"{what} is {size} bytes{measured_as}; the limit is {limit}. {advice}",
            size=size,
            limit=limit,
        )
    return size


class StatecoreModel(BaseModel):
    """Base for every model: unknown fields are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid")


# --- references --------------------------------------------------------------------------------


class SessionRef(StatecoreModel):
    """Which session a row belongs to. Nothing is shared across (namespace, agent, session)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str = DEFAULT_NAMESPACE
    agent_id: str
    session_id: str

    @field_validator("namespace", "agent_id", "session_id")
    @classmethod
    def _ids(cls, v: str, info: Any) -> str:
        return validate_identifier(v, info.field_name)

    @property
    def owner(self) -> str:
        """The owner string of this session's KV, tool and task rows ('/' is never in an id)."""
        return f"{self.agent_id}/{self.session_id}"

    @property
    def kv_scope(self) -> KVScope:
        return KVScope(namespace=self.namespace, owner=self.owner)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.agent_id}/{self.session_id}"


class KVScope(StatecoreModel):
    """The owner of a set of KV buckets: a session (``owner=ref.owner``) or the namespace
    itself (``owner=""``, shared by every session of the namespace)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str = DEFAULT_NAMESPACE
    owner: str = ""

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        return validate_identifier(v, "namespace")

    @field_validator("owner")
    @classmethod
    def _owner(cls, v: str) -> str:
        if v == "":
            return v
        parts = v.split("/")
        if len(parts) != 2:
            raise InvalidIdentifierError("owner must be '' or 'agent_id/session_id'")
        for p in parts:
            validate_identifier(p, "owner")
        return v


# --- conversation ------------------------------------------------------------------------------


class ToolCall(StatecoreModel):
    id: str = Field(min_length=1, max_length=256)
    name: str = Field(min_length=1, max_length=256)
    #: JSON-encoded arguments, as the OpenAI chat-completions API carries them.
    arguments: str = "{}"


class Message(StatecoreModel):
    """A message to append. Tool results carry ``tool_call_id``; assistant tool requests carry
    ``tool_calls``."""

    role: Role
    content: str = ""
    name: str | None = Field(default=None, max_length=256)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = Field(default=None, max_length=256)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("content")
    @classmethod
    def _content(cls, v: str, info: ValidationInfo) -> str:
        if info.context is CARRIED:
            return v
        return validate_text(v)

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.role == "tool" and not self.tool_call_id:
            raise InvalidInputError("a tool message needs the tool_call_id it answers")
        if self.tool_calls and self.role != "assistant":
            raise InvalidInputError("only assistant messages may carry tool_calls")
        if not self.content.strip() and not self.tool_calls and self.role != "tool":
            raise EmptyContentError(f"{self.role} message is empty; send some text")
        return self


class StoredMessage(Message):
    """A message as stored: its place in the log and its token cost, counted once at write."""

    seq: int = Field(ge=1)
    turn_id: str
    index: int = Field(ge=0, description="position of the message within its turn")
    tokens: int = Field(ge=0)
    #: Sum of ``tokens`` of every message of the session up to and including this one, so
    #: the window boundary is one indexed query, never a re-tokenisation.
    cumulative_tokens: int = Field(ge=0)
    created_at: datetime


class Hint(StatecoreModel):
    id: int
    text: str
    created_at: datetime


class Summary(StatecoreModel):
    """A running summary of the log up to and including ``through_seq``."""

    text: str
    through_seq: int = Field(ge=0)
    tokens: int = Field(ge=0)
    created_at: datetime


class SessionInfo(StatecoreModel):
    """The header row of a session: counters kept on write so describe never scans the log."""

    ref: SessionRef
    system_prompt: str | None = None
    last_seq: int = 0
    message_count: int = 0
    token_total: int = 0
    #: First seq of the model's window; compaction moves it forward, never deletes.
    window_start_seq: int = 1
    created_at: datetime
    last_accessed: datetime
    ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS


# --- kv ----------------------------------------------------------------------------------------


class KVEntry(StatecoreModel):
    """A KV value with its revision. ``value`` is bytes when ``kind == "bytes"``, else JSON."""

    bucket: str
    key: str
    kind: Literal["json", "bytes"]
    value: Any
    revision: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _decode_bytes(cls, data: Any) -> Any:
        # Bytes travel through JSON (Temporal payloads, bundles) as base64 text.
        if isinstance(data, dict) and data.get("kind") == "bytes":
            v = data.get("value")
            if isinstance(v, str):
                data = {**data, "value": base64.b64decode(v, validate=True)}
        return data

    @field_serializer("value", when_used="json")
    def _encode_bytes(self, v: Any) -> Any:
        if isinstance(v, bytes | bytearray):
            return base64.b64encode(bytes(v)).decode("ascii")
        return v


class KeyPage(StatecoreModel):
    keys: list[str]
    #: Pass as ``after`` to get the next page; None when this was the last page.
    next_after: str | None = None


# --- scoped state -----------------------------------------------------------------------------


class ScopedState(StatecoreModel):
    """One JSON document per (namespace, task_id, agent_id), versioned for optimistic writes."""

    namespace: str = DEFAULT_NAMESPACE
    task_id: str
    agent_id: str
    state: dict[str, JsonValue]
    version: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime


# --- flow checkpoints --------------------------------------------------------------------------


class FlowCheckpoint(StatecoreModel):
    flow_id: str
    version: int = Field(ge=1)
    step: str
    data: dict[str, JsonValue] = Field(default_factory=dict)
    #: The last conversation seq when the checkpoint was taken, so a fork can cut the log there.
    conversation_seq: int = 0
    created_at: datetime


# --- orchestration -----------------------------------------------------------------------------


class TokenUsage(StatecoreModel):
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class OrchestrationState(StatecoreModel):
    active_step: str | None = None
    recently_used_tools: list[str] = Field(default_factory=list)
    sequence_index: int = Field(default=0, ge=0)
    cumulative_token_usage: TokenUsage = Field(default_factory=TokenUsage)
    last_accessed: datetime
    ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS


class OrchestrationUpdate(StatecoreModel):
    """A partial update: fields left as None are kept."""

    active_step: str | None = None
    recently_used_tools: list[str] | None = None
    sequence_index: int | None = Field(default=None, ge=0)
    cumulative_token_usage: TokenUsage | None = None
    ttl_seconds: int | None = Field(default=None, ge=1)


# --- tools and task slots --------------------------------------------------------------------


class TaskTransition(StatecoreModel):
    from_state: str | None
    to_state: str
    reason: str = ""
    at: datetime


class TaskRecord(StatecoreModel):
    task_id: str
    state: str
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    state_history: list[TaskTransition] = Field(default_factory=list)


# --- control plane (a state-operation result) ------------------------------------------------


class StateStoreReport(StatecoreModel):
    name: str
    enabled: bool = True
    exists: bool = False
    items: int = 0
    tokens: int | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    data: JsonValue = None


class StateOperationResult(StatecoreModel):
    operation: Literal["describe", "reset", "compact", "sweep", "import", "export"]
    session_id: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    stores: list[StateStoreReport] = Field(default_factory=list)
    cleared: list[str] = Field(default_factory=list)
    compacted: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)

    def store(self, name: str) -> StateStoreReport | None:
        return next((s for s in self.stores if s.name == name), None)


class SweepReport(StatecoreModel):
    sessions: list[SessionRef] = Field(default_factory=list)
    kv_keys: int = 0
