"""What crosses Temporal boundaries: workflow input, update/signal/query payloads, activity I/O.

Every workflow, update, signal and activity takes one model and returns one model, so fields
can be added compatibly. Activity names are stable, namespaced constants: an incompatible
input change gets a new name while the old one keeps working. This module is imported by
workflow code, so it stays pure (pydantic and statecore.models only).

None of these models carries a transcript: activities read messages from SQL by reference,
so workflow history grows by a constant per turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, JsonValue, ValidationError, field_validator, model_validator

from statecore.context import SessionProfile
from statecore.errors import ContentTooLargeError, InvalidInputError, UnknownStoreError
from statecore.models import (
    ALL_STORES,
    DEFAULT_NAMESPACE,
    DEFAULT_SESSION_TTL_SECONDS,
    MAX_MESSAGE_BYTES,
    Message,
    Role,
    SessionRef,
    SessionStatus,
    StatecoreModel,
    StateOperationResult,
    StoredMessage,
    TokenUsage,
    ToolCall,
    reject_nul,
    validate_identifier,
    validate_key,
    validate_text,
)

WORKFLOW_TYPE = "AgentSession"
DEFAULT_TASK_QUEUE = "statecore"
#: Updates the server lets one workflow have in flight (its default); the client queues past it.
MAX_IN_FLIGHT_UPDATES = 10
#: Continue-as-new well before the server's 2,000-updates-per-run ceiling.
DEFAULT_MAX_TURNS_PER_RUN = 1000
#: Bounded memory of committed turn ids carried across continue-as-new for cheap dedup;
#: SQL keeps every turn record, so older ids still deduplicate through an activity.
RECENT_TURN_IDS = 64
#: Rejections remembered for the describe report.
RECENT_REJECTIONS = 20
#: A whole ``send_message`` request as JSON (content, name and metadata, escapes included).
#: The message travels twice in the model activity's input (the context's pending message
#: and the commit), and Temporal fails a workflow task whose command carries over 2 MiB:
#: the client and the validator both refuse larger requests.
MAX_TURN_REQUEST_BYTES = MAX_MESSAGE_BYTES + 64 * 1024

# Search attributes (operator contract, DESIGN section 6).
SA_SESSION_ID = "StatecoreSessionId"
SA_AGENT_ID = "StatecoreAgentId"
SA_STATUS = "StatecoreStatus"
SA_TURN = "StatecoreTurn"
SEARCH_ATTRIBUTES: dict[str, str] = {
    SA_SESSION_ID: "Keyword",
    SA_AGENT_ID: "Keyword",
    SA_STATUS: "Keyword",
    SA_TURN: "Int",
}

# Activity names (stable; see module docstring).
ACT_OPEN_SESSION = "statecore.open_session"
ACT_RUN_TURN = "statecore.run_turn"
ACT_BEGIN_TURN = "statecore.begin_turn"
ACT_GENERATE = "statecore.generate"
ACT_COMMIT_TURN = "statecore.commit_turn"
ACT_READ_KV = "statecore.read_kv"
ACT_READ_FLOW = "statecore.read_flow"
ACT_READ_STATE = "statecore.read_state"
ACT_DESCRIBE = "statecore.describe"
ACT_RESET = "statecore.reset"
ACT_COMPACT = "statecore.compact"
ACT_ADD_HINT = "statecore.add_hint"
ACT_CLOSE_SESSION = "statecore.close_session"


def workflow_id_for(agent_id: str, session_id: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """The default workflow id of a session: ``agent-session:{agent_id}:{session_id}`` in
    the default namespace, ``agent-session:{namespace}:{agent_id}:{session_id}`` in any other.

    Two tenants may use the same agent and session ids; one workflow id for both would send
    one tenant's turns into the other's session. Identifiers never contain ':', so the two
    forms cannot be confused."""
    if namespace == DEFAULT_NAMESPACE:
        return f"agent-session:{agent_id}:{session_id}"
    return f"agent-session:{namespace}:{agent_id}:{session_id}"


class TurnCheckpoint(StatecoreModel):
    """The small, bounded state a session workflow holds. Never the transcript."""

    turn: int = 0
    status: SessionStatus = "active"
    pause_reason: str | None = None
    last_seq: int = 0
    message_count: int = 0
    token_total: int = 0
    window_tokens: int = 0
    usage: TokenUsage = Field(default_factory=TokenUsage)
    active_step: str | None = None
    recent_turn_ids: list[str] = Field(default_factory=list)
    compactions: int = 0
    runs: int = 1
    last_operation: str | None = None


class SessionInput(StatecoreModel):
    """Input of the AgentSession workflow. ``{"agent_id": ..., "session_id": ...}`` is enough."""

    agent_id: str
    session_id: str
    namespace: str = DEFAULT_NAMESPACE
    system_prompt: str | None = None
    profile: SessionProfile = Field(default_factory=SessionProfile)
    #: Which model of the worker's registry answers turns.
    model: str = "default"
    #: Idle time after which the session closes (its SQL state is kept unless delete_on_close).
    ttl_seconds: int = Field(default=DEFAULT_SESSION_TTL_SECONDS, ge=1, le=10 * 365 * 86400)
    delete_on_close: bool = False
    auto_summarize: bool = True
    #: A model call may take this long per attempt; it is retried with backoff after that.
    model_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    #: A model call's worker must report liveness this often; a dead worker's turn is retried
    #: on another worker after this long.
    model_heartbeat_seconds: float = Field(default=30.0, gt=0, le=3600)
    max_turns_per_run: int = Field(default=DEFAULT_MAX_TURNS_PER_RUN, ge=1, le=1900)
    #: Filled in by continue-as-new; absent on a fresh start (then state is loaded from SQL).
    checkpoint: TurnCheckpoint | None = None

    @field_validator("agent_id", "session_id", "namespace")
    @classmethod
    def _ids(cls, v: str, info: Any) -> str:
        return validate_identifier(v, info.field_name)

    @field_validator("system_prompt")
    @classmethod
    def _prompt(cls, v: str | None) -> str | None:
        return None if v is None else validate_text(v, "system_prompt")

    @property
    def ref(self) -> SessionRef:
        return SessionRef(
            namespace=self.namespace, agent_id=self.agent_id, session_id=self.session_id
        )


class SendMessageInput(StatecoreModel):
    """The ``send_message`` update: one turn. Sending the same ``turn_id`` again returns the
    same result and stores nothing new."""

    turn_id: str
    content: str
    role: Role = "user"
    name: str | None = Field(default=None, max_length=256)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("turn_id")
    @classmethod
    def _turn_id(cls, v: str) -> str:
        return validate_key(v)

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        return validate_text(v, allow_empty=False)

    @field_validator("role")
    @classmethod
    def _role(cls, v: str) -> str:
        if v not in ("user", "system"):
            raise InvalidInputError(
                f"a turn starts with a user (or system) message, not {v!r}; tool and assistant "
                "messages are produced inside the turn"
            )
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return None if v is None else validate_text(v, "name")

    @model_validator(mode="after")
    def _storable(self) -> SendMessageInput:
        # Everything the store would refuse is refused here, before the turn starts: a
        # message that fails to build inside the handler would fail the workflow task.
        try:
            self.to_message()
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise InvalidInputError(f"message {where}: {first.get('msg')}") from err
        reject_nul(self.metadata, "message metadata")
        size = len(self.model_dump_json().encode("utf-8"))
        if size > MAX_TURN_REQUEST_BYTES:
            raise ContentTooLargeError(
                f"the turn request is {size} bytes as JSON; the limit is "
                f"{MAX_TURN_REQUEST_BYTES}. Keep metadata small and store large documents in "
                "KV or scoped state",
                size=size,
                limit=MAX_TURN_REQUEST_BYTES,
            )
        return self

    def to_message(self) -> Message:
        return Message(role=self.role, content=self.content, name=self.name, metadata=self.metadata)


class ReplyMessage(StatecoreModel):
    role: Literal["assistant"] = "assistant"
    content: str
    tool_calls: list[dict[str, JsonValue]] = Field(default_factory=list)


class TurnResult(StatecoreModel):
    """What a turn returns. ``duplicate`` is true when the turn id had already committed."""

    turn: int
    turn_id: str
    reply: ReplyMessage
    usage: TokenUsage = Field(default_factory=TokenUsage)
    first_seq: int
    last_seq: int
    context_tokens: int = 0
    duplicate: bool = False


# --- signals and control updates ---------------------------------------------------------------


class PauseInput(StatecoreModel):
    reason: str = Field(default="paused by operator", max_length=1000)


class ResumeInput(StatecoreModel):
    pass


class ResetInput(StatecoreModel):
    """``stores`` empty means every store of this session (never another session's)."""

    stores: list[str] = Field(default_factory=list)

    @field_validator("stores")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        unknown = sorted(set(v) - set(ALL_STORES))
        if unknown:
            raise UnknownStoreError(f"unknown store(s) {unknown}; known stores: {list(ALL_STORES)}")
        return v


class CompactInput(StatecoreModel):
    strategy: Literal["recent", "tokens", "summarize"] = "tokens"
    max_tokens: int | None = Field(default=None, ge=1, le=2_000_000)
    max_messages: int | None = Field(default=None, ge=1, le=1_000_000)


class AddHintInput(StatecoreModel):
    text: str

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        validate_text(v, "hint", allow_empty=False)
        if len(v) > 4000:
            raise InvalidInputError("a hint is at most 4,000 characters; keep hints short")
        return v


class MigrateInput(StatecoreModel):
    """Move the session to another task queue (continue-as-new there). Empty = stay."""

    task_queue: str = ""

    @field_validator("task_queue")
    @classmethod
    def _queue(cls, v: str) -> str:
        return v if v == "" else validate_identifier(v, "task_queue")


class CloseInput(StatecoreModel):
    delete_state: bool = False


class DescribeInput(StatecoreModel):
    include_data: bool = False


@dataclass(frozen=True)
class TooManyInputs:
    """Stands in for the arguments of a request that carried more than one input
    (``temporal workflow signal --input a --input b``): AgentSession's handlers take one,
    and calling one with two would fail the workflow task. See statecore.plugin."""

    count: int


class Rejection(StatecoreModel):
    """A request the session refused; kept (bounded) so operators see it in describe."""

    operation: str
    code: str
    message: str
    turn: int


class SessionReport(StateOperationResult):
    """The describe report: Protolink's StateOperationResult plus the workflow checkpoint."""

    agent_id: str = ""
    checkpoint: TurnCheckpoint = Field(default_factory=TurnCheckpoint)
    rejections: list[Rejection] = Field(default_factory=list)


# --- activity inputs and outputs ---------------------------------------------------------------


class OpenSessionInput(StatecoreModel):
    ref: SessionRef
    system_prompt: str | None = None
    ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS


class SessionSnapshot(StatecoreModel):
    """Counters read from SQL: how a fresh run (first start, or resume after close) learns
    where the session stands without replaying anything."""

    turn: int = 0
    last_seq: int = 0
    message_count: int = 0
    token_total: int = 0
    window_tokens: int = 0
    usage: TokenUsage = Field(default_factory=TokenUsage)
    active_step: str | None = None
    stores: list[Any] = Field(default_factory=list)


class RunTurnInput(StatecoreModel):
    ref: SessionRef
    turn_id: str
    turn: int
    message: Message
    profile: SessionProfile
    model: str = "default"


class KVOp(StatecoreModel):
    """A buffered KV write; a bytes value travels as base64 text with ``kind="bytes"``."""

    op: Literal["put", "delete"]
    bucket: str
    key: str
    kind: Literal["json", "bytes"] = "json"
    value: JsonValue = None
    expected_revision: int | None = None
    ttl_seconds: float | None = None


class FlowOp(StatecoreModel):
    flow_id: str
    step: str
    data: dict[str, JsonValue] = Field(default_factory=dict)


class StateOp(StatecoreModel):
    """The turn's final scoped-state document (AutoGen: visible to the host at commit)."""

    state: dict[str, JsonValue]
    expected_version: int | None = None


class OrchestrationOp(StatecoreModel):
    active_step: str | None = None
    set_active_step: bool = False
    used_tools: list[str] = Field(default_factory=list)
    advance_sequence: int = 0


class CommitTurnInput(StatecoreModel):
    """Everything a turn changed, committed by one local activity in one SQL transaction."""

    ref: SessionRef
    turn_id: str
    turn: int
    messages: list[Message] = Field(default_factory=list)
    kv: list[KVOp] = Field(default_factory=list)
    flow: list[FlowOp] = Field(default_factory=list)
    state: StateOp | None = None
    orchestration: OrchestrationOp | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    result: dict[str, JsonValue] = Field(default_factory=dict)


class CommitTurnResult(StatecoreModel):
    turn: int
    duplicate: bool
    first_seq: int
    last_seq: int
    message_count: int
    token_total: int
    #: Tokens from the window start to the end of the log (drives auto-summarize).
    window_tokens: int = 0
    state_version: int | None = None
    result: dict[str, JsonValue] = Field(default_factory=dict)


class BeginTurnInput(StatecoreModel):
    ref: SessionRef
    turn_id: str
    load_state: bool = False


class BeginTurnResult(StatecoreModel):
    committed: CommitTurnResult | None = None
    state: dict[str, JsonValue] | None = None
    state_version: int | None = None
    last_seq: int = 0


class GenerateInput(StatecoreModel):
    """A model call whose context is assembled from SQL plus the turn's uncommitted messages."""

    ref: SessionRef
    turn_id: str
    pending: list[Message] = Field(default_factory=list)
    profile: SessionProfile = Field(default_factory=SessionProfile)
    model: str = "default"
    tools: list[dict[str, JsonValue]] = Field(default_factory=list)
    #: When set, the reply and this turn's buffered changes commit in the same activity
    #: (one round trip per chat turn); a turn id already committed skips the model call.
    commit: CommitTurnInput | None = None


class GenerateResult(StatecoreModel):
    message: Message
    usage: TokenUsage = Field(default_factory=TokenUsage)
    context_tokens: int = 0
    finish_reason: str = "stop"
    commit: CommitTurnResult | None = None


class ReadKVInput(StatecoreModel):
    ref: SessionRef
    bucket: str
    key: str


class ReadFlowInput(StatecoreModel):
    ref: SessionRef
    flow_id: str


class ReadStateInput(StatecoreModel):
    """Read the scoped state of (task_id=session_id, agent_id) of the session."""

    ref: SessionRef


class ReadStateResult(StatecoreModel):
    state: dict[str, JsonValue] | None = None
    version: int | None = None


class ControlInput(StatecoreModel):
    """Input of the control activities (describe/reset/compact/add_hint)."""

    ref: SessionRef
    include_data: bool = False
    stores: list[str] = Field(default_factory=list)
    compact: CompactInput | None = None
    hint: str | None = None
    profile: SessionProfile = Field(default_factory=SessionProfile)
    model: str = "default"


class ControlResult(StatecoreModel):
    report: StateOperationResult
    snapshot: SessionSnapshot


def stored_reply(messages: list[StoredMessage]) -> ReplyMessage:
    """The assistant reply of a committed turn (its last assistant message)."""
    for m in reversed(messages):
        if m.role == "assistant":
            return ReplyMessage(
                content=m.content, tool_calls=[c.model_dump() for c in m.tool_calls]
            )
    return ReplyMessage(content="")


# --- tools: what a tool-using workflow offers the model and how it runs a tool ---------------

# The OpenAI function-name alphabet (the same rule as statecore.llm.ToolSpec).
_TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolBinding(StatecoreModel):
    """A tool as the model sees it (``name``, ``description``, ``parameters``) bound to the
    activity that runs it. Tools are user code: any activity taking ``ToolCallInput`` and
    returning ``ToolCallResult`` can be bound. The timeouts bound how long a dead worker can
    hold a call before it is retried elsewhere."""

    name: str
    activity: str
    description: str = ""
    parameters: dict[str, JsonValue] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    timeout_seconds: float = Field(default=60.0, gt=0, le=24 * 3600)
    #: Set for long tools that heartbeat: a killed worker is noticed after this long.
    heartbeat_seconds: float | None = Field(default=None, gt=0, le=3600)
    max_attempts: int = Field(default=3, ge=1, le=100)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _TOOL_NAME_RE.match(v):
            raise InvalidInputError(
                f"tool name {v!r} may use only letters, digits, '_' and '-' (1 to 64 characters)"
            )
        return v

    @field_validator("activity")
    @classmethod
    def _activity(cls, v: str) -> str:
        return validate_key(v)

    def spec(self) -> dict[str, JsonValue]:
        """What the model is offered (``statecore.llm.ToolSpec``'s shape)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolCallInput(StatecoreModel):
    """Input of a tool activity: the model's call (arguments as JSON text, as the model wrote
    them) and the session it belongs to."""

    ref: SessionRef
    turn_id: str
    call: ToolCall


class ToolCallResult(StatecoreModel):
    """What the tool tells the model; stored as the tool message's content."""

    content: str

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        return validate_text(v, "tool result")
