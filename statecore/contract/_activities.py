"""What statecore's activities take and return, and their stable names.

Activity names are namespaced constants: an incompatible input change gets a new name while
the old one keeps working. None of these models carries a transcript: activities read
messages from SQL by reference, so workflow history grows by a constant per turn. Imported by
workflow code, so it stays pure.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, JsonValue, field_validator

from statecore.contract._session import CompactInput, LogCounters, TurnBudget
from statecore.contract._shares import ShareChanges
from statecore.core._errors import InvalidInputError
from statecore.core._limits import DEFAULT_SESSION_TTL_SECONDS
from statecore.core._models import (
    Message,
    SessionRef,
    StatecoreModel,
    StateOperationResult,
    TokenUsage,
    ToolCall,
    validate_key,
    validate_text,
)
from statecore.core._profile import SessionProfile

# Activity names (stable; see module docstring).
ACT_OPEN_SESSION = "statecore.open_session"
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


# --- activity inputs and outputs ---------------------------------------------------------------


class OpenSessionInput(StatecoreModel):
    ref: SessionRef
    system_prompt: str | None = None
    ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS
    #: The session's model and profile, so the worker can report the turns' context budget.
    model: str = "default"
    profile: SessionProfile = Field(default_factory=SessionProfile)


class SessionSnapshot(LogCounters):
    """Counters read from SQL: how a fresh run (first start, or resume after close) learns
    where the session stands without replaying anything."""

    turn: int = 0
    usage: TokenUsage = Field(default_factory=TokenUsage)
    active_step: str | None = None
    stores: list[Any] = Field(default_factory=list)
    #: The context budget the session's turns get on this worker (None: a framework agent
    #: answers them, or the worker has no such model).
    budget: TurnBudget | None = None


class KVOp(StatecoreModel):
    """A buffered KV write; a bytes value travels as base64 text with ``kind="bytes"``."""

    # NaN and infinity are refused when the turn buffers the write, as the store would refuse
    # them at commit (JSON has no spelling for them).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

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
    """The turn's final scoped-state document (visible outside the turn once it commits)."""

    state: dict[str, JsonValue]
    expected_version: int | None = None


class OrchestrationOp(StatecoreModel):
    active_step: str | None = None
    set_active_step: bool = False
    used_tools: list[str] = Field(default_factory=list)
    advance_sequence: int = 0


class ModelOutcome(StatecoreModel):
    """What a turn's model call produced, stored with the turn record so that sending the
    same turn id again answers without calling the model."""

    reply: Message
    usage: TokenUsage = Field(default_factory=TokenUsage)
    context_tokens: int = 0


def _empty_is_none(value: Any) -> Any:
    # Earlier releases wrote "no outcome" as {}; recorded histories and turn records keep it.
    return None if value == {} else value


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
    #: Grants, revocations and writes through redeemed share tokens (statecore.operations._shares).
    shares: ShareChanges | None = None
    #: The model call's outcome, stored with the turn (a turn without a model call has none).
    result: ModelOutcome | None = None

    _no_outcome = field_validator("result", mode="before")(_empty_is_none)


class CommitTurnResult(LogCounters):
    turn: int
    duplicate: bool
    first_seq: int
    state_version: int | None = None
    #: What the turn stored as its outcome (a duplicate answers from it). A model call's
    #: commit returns none: its outcome is the call's own result.
    result: ModelOutcome | None = None

    _no_outcome = field_validator("result", mode="before")(_empty_is_none)


class GenerateInput(StatecoreModel):
    """A model call whose context is assembled from SQL plus the turn's uncommitted messages."""

    ref: SessionRef
    turn_id: str
    #: The turn's messages not stored yet. With ``commit`` set they are ``commit.messages``
    #: and this stays empty: activity input is written to history on every turn.
    pending: list[Message] = Field(default_factory=list)
    profile: SessionProfile = Field(default_factory=SessionProfile)
    model: str = "default"
    tools: list[dict[str, JsonValue]] = Field(default_factory=list)
    #: When set, the reply and this turn's buffered changes commit in the same activity
    #: (one round trip per chat turn); a turn id already committed skips the model call.
    commit: CommitTurnInput | None = None
    #: Publish the reply as it is generated (the turn was sent with ``stream``); otherwise
    #: the call writes no stream rows.
    stream: bool = Field(default=False, exclude_if=lambda on: not on)


class GenerateResult(StatecoreModel):
    message: Message
    usage: TokenUsage = Field(default_factory=TokenUsage)
    context_tokens: int = 0
    finish_reason: str = "stop"
    commit: CommitTurnResult | None = None
    #: The budget the context was assembled within (None when a framework agent answered).
    budget: TurnBudget | None = None


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


# --- tools: what a tool-using workflow offers the model and how it runs a tool ---------------

# The OpenAI function-name alphabet (the same rule as statecore.llm.ToolSpec).
_TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


#: A tool that takes no arguments.
_EMPTY_OBJECT_SCHEMA: dict[str, JsonValue] = {"type": "object", "properties": {}}


class ToolBinding(StatecoreModel):
    """A tool as the model sees it (``name``, ``description``, ``parameters``) bound to the
    activity that runs it. Tools are user code: any activity taking ``ToolCallInput`` and
    returning ``ToolCallResult`` can be bound. The timeouts bound how long a dead worker can
    hold a call before it is retried elsewhere."""

    name: str
    activity: str
    description: str = ""
    parameters: dict[str, JsonValue] = Field(default_factory=lambda: _EMPTY_OBJECT_SCHEMA.copy())
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
