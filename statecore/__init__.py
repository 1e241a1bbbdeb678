"""statecore: durable state for long-running AI agents on Temporal.

The names below are statecore's public face; everything else may move between releases.
They load on first use, so ``from statecore import open_store`` (or ``statecore.store``)
pulls in no temporalio, and importing statecore never imports an agent framework::

    from statecore import StatecorePlugin, AgentSessionClient, TurnSession, Message, SessionRef

The error tree is ``statecore.errors``; its classes (and ``from_failure``) are exported here
too, by the names that module lists.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from statecore import errors as _errors

__version__ = "0.2.0"

#: Each public name once, under the module that defines it. ``__init__.pyi``, the type
#: checkers' view of this module, is generated from this table and the error tree's names
#: (``python -m tests.public_stub``; tests/test_public_api.py checks it is current).
_EXPORTS_BY_MODULE: dict[str, tuple[str, ...]] = {
    # Temporal: the plugin, the client and the worker.
    "statecore.temporal._plugin": ("StatecorePlugin",),
    # Large payloads by reference in statecore's database (docs/large_values.md).
    "statecore.temporal._blob_driver": (
        "StatecoreBlobPlugin",
        "StatecoreBlobDriver",
        "with_blob_storage",
        "sweep_blobs",
    ),
    "statecore.temporal._client": ("AgentSessionClient",),
    "statecore.temporal._worker_config": ("WorkerConfig",),
    "statecore.temporal._worker": ("run_worker",),
    "statecore.temporal._connection": ("ConnectionConfig",),
    "statecore.agent_session._workflow": ("AgentSession",),
    # The turn API, for your own workflows.
    "statecore.workflow._turn": ("TurnSession", "Turn"),
    # The operator contract.
    "statecore.contract._session": (
        "SessionInput",
        "SendMessageInput",
        "TurnResult",
        "SessionReport",
        "DEFAULT_TASK_QUEUE",
        "WORKFLOW_TYPE",
        "workflow_id_for",
    ),
    # A turn's reply as it is generated (AgentSessionClient.stream, docs/streaming.md).
    "statecore.contract._streams": (
        "FinalEvent",
        "RestartedEvent",
        "StreamPosition",
        "TextEvent",
        "ToolCallEvent",
        "TurnEvent",
    ),
    # The data.
    "statecore.core._models": (
        "Message",
        "StoredMessage",
        "ToolCall",
        "SessionRef",
        "TokenUsage",
        "KVEntry",
        "ScopedState",
        "FlowCheckpoint",
        "StateOperationResult",
    ),
    "statecore.core._profile": ("SessionProfile",),
    # A turn runner of your own for StatecorePlugin(agents=...) (docs/openai_agents.md).
    "statecore.operations._agent_turns": (
        "AgentTurnRunner",
        "AgentTurnRequest",
        "AgentTurnOutcome",
    ),
    # Tools a workflow binds to a model call (see docs/tool_agent.md).
    "statecore.contract._activities": ("ToolBinding", "ToolCallInput", "ToolCallResult"),
    # Schema migrations (Alembic), for deployments that migrate apart from the workers.
    "statecore.store._migrate": ("upgrade_database", "current_revision", "HEAD_REVISION"),
    # Payload encryption: needs the optional `encryption` extra (cryptography).
    "statecore.temporal._encryption": (
        "EncryptionCodec",
        "Keyring",
        "encrypted_data_converter",
        "generate_key",
    ),
    # Storage.
    "statecore.store": ("StateStore", "open_store", "run_transaction"),
    # The change feed: every committed change, in order (docs/shared_state.md).
    "statecore.core._change_events": ("ChangeEvent",),
    "statecore.store._feed": ("follow_events", "read_events"),
    # Share tokens inside a turn (``turn.shares``).
    "statecore.workflow._shares": ("SharedState", "SharedKV"),
    # Models (the LLM kind).
    "statecore.llm": (
        "ChatModel",
        "ModelRequest",
        "ModelResponse",
        "OfflineModel",
        "OpenAICompatibleModel",
    ),
}

#: Public name -> the module that defines it (the errors: ``statecore.errors``).
_EXPORTS: dict[str, str] = {
    **{name: module for module, names in _EXPORTS_BY_MODULE.items() for name in names},
    **{name: "statecore.errors" for name in _errors.__all__ if name != "ERRORS_BY_CODE"},
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'statecore' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
