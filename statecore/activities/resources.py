"""What the activities depend on, handed to them in ``__init__``.

The store is opened when the worker starts (the plugin's run context) and closed when it
stops, so activity classes are built before the database connection exists and look it up
here at call time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from statecore.core.errors import InvalidInputError, StatecoreError
from statecore.core.tokens import TokenCounter
from statecore.llm import ChatModel
from statecore.store.base import StateStore


@dataclass
class WorkerResources:
    """The store, token counter and models shared by one worker's activities."""

    models: Mapping[str, ChatModel]
    counter: TokenCounter = field(default_factory=TokenCounter)
    _store: StateStore | None = None

    @property
    def store(self) -> StateStore:
        if self._store is None:
            raise StatecoreError("the statecore store is not open; is the worker running?")
        return self._store

    def attach(self, store: StateStore | None) -> None:
        self._store = store

    def model(self, name: str) -> ChatModel:
        found = self.models.get(name) or (self.models.get("default") if name == "default" else None)
        if found is None:
            raise InvalidInputError(
                f"no model named {name!r} on this worker; configured: {sorted(self.models)}"
            )
        return found
