"""The AgentSession contract: names, workflow input, and update/signal/query payloads.

This is the public interface operators and programs use (docs/operators.md): the workflow type,
id, search attributes, and the JSON shapes of ``send_message``, the signals and ``describe``.
Every handler takes one model and returns one model, so fields can be added compatibly. It
is imported by workflow code, so it stays pure (pydantic and statecore's models only).
Activity inputs and outputs live in ``statecore.contract._activities``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, JsonValue, field_validator, model_validator

from statecore.core._errors import (
    ContentTooLargeError,
    InvalidInputError,
    ResetRefusedError,
    UnknownStoreError,
)
from statecore.core._limits import (
    DEFAULT_IDLE_CONTINUE_MIN_EVENTS,
    DEFAULT_IDLE_CONTINUE_SECONDS,
    DEFAULT_MAX_TURNS_PER_RUN,
    DEFAULT_MODEL_ATTEMPTS,
    DEFAULT_SESSION_TTL_SECONDS,
    MAX_TURN_REQUEST_BYTES,
    MAX_TURNS_PER_RUN,
)
from statecore.core._models import (
    ALL_STORES,
    DEFAULT_NAMESPACE,
    Message,
    Role,
    SessionRef,
    SessionStatus,
    StatecoreModel,
    StateOperationResult,
    TokenUsage,
    reject_nul,
    validate_identifier,
    validate_text,
    validate_turn_id,
)
from statecore.core._prechecked import prechecked
from statecore.core._profile import SessionProfile

WORKFLOW_TYPE = "AgentSession"
DEFAULT_TASK_QUEUE = "statecore"
#: Bounded memory of committed turn ids carried across continue-as-new for cheap dedup;
#: SQL keeps every turn record, so older ids still deduplicate through an activity.
RECENT_TURN_IDS = 64
#: Rejections remembered for the describe report.
RECENT_REJECTIONS = 20

# Search attributes (the operator contract, docs/operators.md).
SA_SESSION_ID = "StatecoreSessionId"
SA_AGENT_ID = "StatecoreAgentId"
SA_STATUS = "StatecoreStatus"
SA_TURN = "StatecoreTurn"
#: ``StatecoreTurn`` moves with a session's first turn and then every this many turns; every
#: other change (status, a new run, a reset) writes the exact turn with it. An upsert is a
#: history event and a visibility write per turn; at 10 a filter such as ``StatecoreTurn > 100``
#: is off by at most 9 turns, and the 1,000-turn run length is a multiple of it. The exact turn
#: is always in the ``describe`` query and the session's current details.
TURN_SEARCH_ATTRIBUTE_EVERY = 10
SEARCH_ATTRIBUTES: dict[str, str] = {
    SA_SESSION_ID: "Keyword",
    SA_AGENT_ID: "Keyword",
    SA_STATUS: "Keyword",
    SA_TURN: "Int",
}


def workflow_id_for(agent_id: str, session_id: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """The default workflow id of a session: ``agent-session:{agent_id}:{session_id}`` in
    the default namespace, ``agent-session:{namespace}:{agent_id}:{session_id}`` in any other.

    Two tenants may use the same agent and session ids; one workflow id for both would send
    one tenant's turns into the other's session. Identifiers never contain ':', so the two
    forms cannot be confused."""
    if namespace == DEFAULT_NAMESPACE:
        return f"agent-session:{agent_id}:{session_id}"
    return f"agent-session:{namespace}:{agent_id}:{session_id}"


class OperatorInput(StatecoreModel):
    """Base of everything an operator or a program sends a session.

    Strict: a JSON string is never read as a number or a boolean (``{"delete_state": "yes"}``
    must not delete anything), a float is never read as an integer, and NaN or infinity is
    refused anywhere, metadata included, because the store refuses them too: nothing is
    accepted into history that the store would not take."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class LogCounters(StatecoreModel):
    """Where a session's conversation log stands: the one model of these counters, shared by
    the workflow's checkpoint, a run's snapshot from SQL and a committed turn's result."""

    last_seq: int = 0
    message_count: int = 0
    token_total: int = 0
    #: Tokens from the window start to the end of the log (drives auto-summarize).
    window_tokens: int = 0

    def take_counters(self, source: LogCounters) -> None:
        """Set this model's log counters to ``source``'s."""
        for name in LogCounters.model_fields:
            setattr(self, name, getattr(source, name))


class TurnBudget(StatecoreModel):
    """The context budget the worker applies to a session's turns and the tokenizer it
    counts with, as its activities report them: what lets the session's update validator
    refuse a message that can never fit before accepting it."""

    max_tokens: int = Field(ge=1)
    encoding: str


class TurnCheckpoint(LogCounters):
    """The small, bounded state a session workflow holds. Never the transcript."""

    turn: int = 0
    status: SessionStatus = "active"
    pause_reason: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    active_step: str | None = None
    recent_turn_ids: list[str] = Field(default_factory=list)
    compactions: int = 0
    runs: int = 1
    last_operation: str | None = None
    #: The budget the worker last reported (at the session's open and with each answered
    #: turn); None until then, and for sessions a framework agent answers.
    budget: TurnBudget | None = None


class Rejection(StatecoreModel):
    """A request the session refused; kept (bounded) so operators see it in describe."""

    operation: str
    code: str
    message: str
    turn: int


class SessionInput(OperatorInput):
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
    #: A model call that keeps failing as transient (an endpoint down or overloaded) is tried
    #: this many times, with backoff from 1 s to 30 s between attempts (about 2.5 minutes at
    #: the default), then the turn fails with the last attempt's typed error
    #: (ModelUnavailable) and the session takes its next turn as usual.
    model_attempts: int = Field(default=DEFAULT_MODEL_ATTEMPTS, ge=1, le=1000)
    max_turns_per_run: int = Field(default=DEFAULT_MAX_TURNS_PER_RUN, ge=1, le=MAX_TURNS_PER_RUN)
    #: Continue as new after this many seconds without a turn or an operation, once per idle
    #: period (only a run that has taken turns or operations moves on); 0 never does.
    idle_continue_seconds: int = Field(
        default=DEFAULT_IDLE_CONTINUE_SECONDS, ge=0, le=10 * 365 * 86400
    )
    #: An idle run continues as new only once its history holds this many events.
    idle_continue_min_events: int = Field(default=DEFAULT_IDLE_CONTINUE_MIN_EVENTS, ge=0, le=51_200)
    #: Filled in by an idle continue-as-new: how long the session had been idle then, so the
    #: TTL still counts from its last activity, not from the new run's start.
    idle_carried_seconds: float = Field(default=0.0, ge=0)
    #: Filled in by continue-as-new; absent on a fresh start (then state is loaded from SQL).
    checkpoint: TurnCheckpoint | None = None
    #: The previous run's recent rejections, carried by continue-as-new so describe keeps
    #: showing them.
    rejections: list[Rejection] = Field(default_factory=list, max_length=RECENT_REJECTIONS)

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


class SendMessageInput(OperatorInput):
    """The ``send_message`` update: one turn. Sending the same ``turn_id`` again returns the
    same result and stores nothing new."""

    turn_id: str
    content: str
    role: Role = "user"
    name: str | None = Field(default=None, max_length=256)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    #: Publish the reply's text to the turn's stream while it is generated, for readers
    #: (``AgentSessionClient.stream`` sets it). A turn without it writes no stream rows, and
    #: the field is left out of the payload when off: such a turn's history is as before.
    stream: bool = Field(default=False, exclude_if=lambda on: not on)

    @field_validator("turn_id")
    @classmethod
    def _turn_id(cls, v: str) -> str:
        return validate_turn_id(v)

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
        # Everything the store would refuse is refused here, before the turn starts: the
        # fields above hold a user or system message to Message's own rules (its text by
        # the same validate_text, its name and metadata), so ``to_message`` need not check
        # them again (tests/test_input_properties.py holds the two together). The request's
        # size is checked on its encoded form where that is at hand (check_turn_request_size).
        reject_nul(self.metadata, "message metadata")
        return self

    def to_message(self) -> Message:
        """The turn's first message, from these already checked fields (not checked again)."""
        return prechecked(
            Message,
            {
                "role": self.role,
                "content": self.content,
                "name": self.name,
                "tool_calls": [],
                "tool_call_id": None,
                "metadata": self.metadata,
            },
        )


#: Bytes the fields a sender may leave out (role, name, metadata) add when statecore encodes
#: a request: a received request this far below the limit is below it encoded too.
_OMITTED_FIELDS_BYTES = 1024


def check_turn_request_size(request: SendMessageInput, received: int) -> None:
    """ContentTooLargeError for a ``send_message`` request over MAX_TURN_REQUEST_BYTES as
    statecore encodes it (the activity inputs that carry it again). ``received`` is the size
    of the payload it came in (the client's own, before sending; the update validator's, as
    received): only a request that comes near the limit is encoded again to be measured, so
    a sender's escapes (``\u00e9``) and spacing do not count against it."""
    size = received
    if size > MAX_TURN_REQUEST_BYTES - _OMITTED_FIELDS_BYTES:
        size = len(request.model_dump_json().encode("utf-8"))
    if size > MAX_TURN_REQUEST_BYTES:
        raise ContentTooLargeError(
            f"the turn request is {size} bytes as JSON; the limit is "
            f"{MAX_TURN_REQUEST_BYTES}. Keep metadata small and store large documents in "
            "KV or scoped state",
            size=size,
            limit=MAX_TURN_REQUEST_BYTES,
        )


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


class PauseInput(OperatorInput):
    reason: str = Field(default="paused by operator", max_length=1000)


class ResumeInput(OperatorInput):
    pass


class ResetInput(OperatorInput):
    """A reset names what it clears: ``{"stores": [...]}`` (those stores of this session) or
    ``{"all": true}`` (every store of this session, never another session's). ``{}`` names
    nothing and is refused, so a reset sent from an empty dialog box wipes nothing."""

    stores: list[str] = Field(default_factory=list)
    all: bool = False

    @field_validator("stores")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        unknown = sorted(set(v) - set(ALL_STORES))
        if unknown:
            raise UnknownStoreError(f"unknown store(s) {unknown}; known stores: {list(ALL_STORES)}")
        return v

    @model_validator(mode="after")
    def _names_what_it_clears(self) -> ResetInput:
        if self.all and self.stores:
            raise ResetRefusedError(
                'a reset takes {"stores": [...]} or {"all": true}, not both; '
                f"stores={self.stores} with all=true is ambiguous, so nothing was cleared"
            )
        if not self.all and not self.stores:
            raise ResetRefusedError(
                "a reset names what it clears, and this one names nothing, so nothing was "
                'cleared. Send {"stores": ["conversation"]} (any of '
                f'{", ".join(ALL_STORES)}) or {{"all": true}} for every store of this session'
            )
        return self

    @property
    def store_names(self) -> list[str] | None:
        """The stores to clear; None means every store of this session."""
        return None if self.all else list(self.stores)


class CompactInput(OperatorInput):
    strategy: Literal["recent", "tokens", "summarize"] = "tokens"
    max_tokens: int | None = Field(default=None, ge=1, le=2_000_000)
    max_messages: int | None = Field(default=None, ge=1, le=1_000_000)


class AddHintInput(OperatorInput):
    text: str

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        validate_text(v, "hint", allow_empty=False)
        if len(v) > 4000:
            raise InvalidInputError("a hint is at most 4,000 characters; keep hints short")
        return v


class MigrateInput(OperatorInput):
    """Move the session to another task queue (continue-as-new there). Empty = stay."""

    task_queue: str = ""

    @field_validator("task_queue")
    @classmethod
    def _queue(cls, v: str) -> str:
        return v if v == "" else validate_identifier(v, "task_queue")


class CloseInput(OperatorInput):
    delete_state: bool = False


class DescribeInput(OperatorInput):
    include_data: bool = False


@dataclass(frozen=True)
class TooManyInputs:
    """Stands in for the arguments of a request that carried more than one input
    (``temporal workflow signal --input a --input b``): AgentSession's handlers take one,
    and calling one with two would fail the workflow task. See statecore.temporal._plugin."""

    count: int


class SessionReport(StateOperationResult):
    """The describe report: a state-operation result plus the workflow checkpoint."""

    agent_id: str = ""
    checkpoint: TurnCheckpoint = Field(default_factory=TurnCheckpoint)
    rejections: list[Rejection] = Field(default_factory=list)


# --- what the Temporal Web UI shows operators ----------------------------------------------------

_STORES = "|".join(ALL_STORES)

#: Each signal's description, shown by the Web UI beside its name: the input shape first.
SIGNAL_DESCRIPTIONS: dict[str, str] = {
    "pause": 'Park the session at its next turn boundary. Input: {"reason": str} (optional).',
    "resume": "Let a paused session take turns again. Input: {} (or nothing).",
    "reset": (
        f'Delete stores of this session. Input: {{"stores": ["{_STORES}", ...]}} or '
        '{"all": true} for every store; {} is refused.'
    ),
    "compact": (
        'Move the context window (never deletes). Input: {"strategy": '
        '"recent"|"tokens"|"summarize", "max_tokens": int, "max_messages": int}, all optional.'
    ),
    "add_hint": 'Add a hint to the context. Input: {"text": str} (required, <= 4,000 chars).',
    "migrate": (
        'Continue the session on another task queue. Input: {"task_queue": str} (empty: this one).'
    ),
    "close": (
        'Close the session; its SQL state is kept. Input: {"delete_state": true} also '
        "deletes it (optional)."
    ),
}

#: Each update's description: updates are for programs, and return a result.
UPDATE_DESCRIPTIONS: dict[str, str] = {
    "send_message": (
        'One turn. Input: {"turn_id": str, "content": str, "role": "user"|"system", "name": '
        'str, "metadata": {...}} (role, name, metadata optional). Returns {"turn", "reply", '
        '"usage", ...}; the same turn_id again returns the same result.'
    ),
    "reset_state": "As the reset signal, returning the report. Input: "
    + SIGNAL_DESCRIPTIONS["reset"].split("Input: ", 1)[1],
    "compact_state": "As the compact signal, returning the report. Input: "
    + SIGNAL_DESCRIPTIONS["compact"].split("Input: ", 1)[1],
    "describe_state": (
        'A fresh report read from SQL. Input: {"include_data": bool} (optional; true adds '
        "the stored data)."
    ),
}

#: The query's description.
QUERY_DESCRIPTIONS: dict[str, str] = {
    "describe": (
        'The session report from the workflow (no SQL read). Input: {"include_data": bool} '
        "(optional). Returns stores, checkpoint (turn, status) and recent rejections."
    ),
}

#: Signals and updates received under any other name (a typo such as ``Pause``) are recorded
#: as rejections that list the valid names.
UNKNOWN_SIGNAL_DESCRIPTION = (
    "Any other signal name is recorded as a rejection (see the describe query) listing the "
    f"valid names: {', '.join(SIGNAL_DESCRIPTIONS)}."
)
UNKNOWN_UPDATE_DESCRIPTION = (
    "Any other update name is refused with UnknownOperation, listing the valid names: "
    f"{', '.join(UPDATE_DESCRIPTIONS)}."
)


def unknown_operation_message(kind: Literal["signal", "update"], name: str) -> str:
    """What an operator reads after sending a name the session does not handle."""
    valid = SIGNAL_DESCRIPTIONS if kind == "signal" else UPDATE_DESCRIPTIONS
    return (
        f"AgentSession has no {kind} named {name[:100]!r}; the {kind}s are "
        f"{', '.join(valid)} (names are case-sensitive)"
    )


def session_summary(agent_id: str, session_id: str) -> str:
    """The static summary a session's workflow starts with (one line in the UI's list)."""
    return f"statecore session {agent_id} / {session_id}"


def session_details(agent_id: str, session_id: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """The static details a session's workflow starts with: what it is and how to steer it.
    The live status is in the current details. Not encrypted by a payload codec: ids only."""
    lines = [
        f"**statecore session** agent `{agent_id}`, session `{session_id}`, "
        f"statecore namespace `{namespace}`.",
        "",
        "Signals (More Actions > Send a Signal):",
        *(f"- `{name}`: {text}" for name, text in SIGNAL_DESCRIPTIONS.items()),
        "",
        "Query `describe` for the report (stores, checkpoint, rejections). Request "
        "Cancellation closes the session at a turn boundary and keeps its state. "
        "See docs/operators.md.",
    ]
    return "\n".join(lines)
