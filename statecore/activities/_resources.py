"""What the activities depend on, handed to them in ``__init__``.

The store is opened when the worker starts (the plugin's run context) and closed when it
stops, so activity classes are built before the database connection exists and look it up
here at call time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from statecore.contract._session import TurnBudget
from statecore.core._errors import StatecoreError, UnknownAgentError
from statecore.core._limits import DEFAULT_STREAM_FLUSH_SECONDS, MAX_INLINE_VALUE_BYTES
from statecore.core._model_windows import context_budget
from statecore.core._profile import SessionProfile
from statecore.core._tokens import TokenCounter
from statecore.llm import ChatModel
from statecore.operations._agent_turns import AgentTurnRunner
from statecore.store._base import StateStore


@dataclass
class WorkerResources:
    """The store, token counter and models shared by one worker's activities."""

    models: Mapping[str, ChatModel]
    counter: TokenCounter = field(default_factory=TokenCounter)
    #: Framework agents that answer turns in place of a model, by name.
    agents: Mapping[str, AgentTurnRunner] = field(default_factory=dict)
    #: Shortest pause between two writes of a streaming turn's row (docs/streaming.md).
    stream_flush_seconds: float = DEFAULT_STREAM_FLUSH_SECONDS
    #: Whether this worker stores large payloads by reference (``blob_threshold_bytes``):
    #: then a turn reads documents and KV values up to 16 MiB, else up to
    #: MAX_INLINE_VALUE_BYTES (a larger payload would fail the workflow task every time).
    large_values: bool = False
    _store: StateStore | None = None

    @property
    def store(self) -> StateStore:
        if self._store is None:
            raise StatecoreError("the statecore store is not open; is the worker running?")
        return self._store

    def check_inline(self, size: int, what: str, error: type[StatecoreError]) -> None:
        """``error`` when a value of ``size`` bytes is more than a turn may read inline."""
        if self.large_values or size <= MAX_INLINE_VALUE_BYTES:
            return
        raise error(
            f"{what} is {size:,} bytes; a turn reads at most {MAX_INLINE_VALUE_BYTES:,} bytes "
            "inline. Store large payloads by reference to read up to 16 MiB: "
            "StatecorePlugin(..., blob_threshold_bytes=256 * 1024), see docs/large_values.md",
            size=size,
            limit=MAX_INLINE_VALUE_BYTES,
        )

    def attach(self, store: StateStore | None) -> None:
        self._store = store

    def model(self, name: str) -> ChatModel:
        found = self.models.get(name) or (self.models.get("default") if name == "default" else None)
        if found is None:
            raise UnknownAgentError(
                f"no model or agent named {name!r} on this worker; models: "
                f"{sorted(self.models)}, agents: {sorted(self.agents)}. Name one of them "
                "(send(..., model=...), statecore chat --model); a session this turn "
                "opened ends with the refusal, so the next send may name another",
                name=name,
            )
        return found

    def agent_for(self, model: str, agent_id: str) -> AgentTurnRunner | None:
        """The framework agent that answers a turn: the one the session names as its model,
        or, for a session on the default model, the one registered under its agent id."""
        if model in self.agents:
            return self.agents[model]
        return self.agents.get(agent_id) if model == "default" else None

    def turn_budget(self, model: ChatModel, profile: SessionProfile) -> TurnBudget:
        """The budget ``model``'s turns assemble their context within: the profile's
        ``max_tokens``, else the model's window less the reply's room (a model client may
        state its window as ``context_window``; one that does not gets the small default)."""
        window = getattr(model, "context_window", None)
        return TurnBudget(
            max_tokens=context_budget(profile.max_tokens, window),
            encoding=self.counter.encoding_name,
        )


def json_size(value: object) -> int:
    """A value's size as the store measures it: compact JSON, UTF-8."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8"))
