"""statecore: durable state for long-running AI agents on Temporal.

The names below are statecore's public face; everything else may move between releases.
They load on first use, so ``from statecore import open_store`` (or ``statecore.store``)
pulls in no temporalio, and importing statecore never imports an agent framework::

    from statecore import StatecorePlugin, AgentSessionClient, TurnSession, Message, SessionRef
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

#: Public name -> the module that defines it. One table, so ``__all__``, ``__getattr__`` and
#: the type checker's view below cannot disagree.
_EXPORTS: dict[str, str] = {
    # Temporal: the plugin, the client and the worker.
    "StatecorePlugin": "statecore.temporal.plugin",
    "AgentSessionClient": "statecore.temporal.client",
    "WorkerConfig": "statecore.temporal.worker_config",
    "run_worker": "statecore.temporal.worker",
    "ConnectionConfig": "statecore.temporal.connection",
    "AgentSession": "statecore.agent_session.workflow",
    # The turn API, for your own workflows.
    "TurnSession": "statecore.workflow.turn",
    "Turn": "statecore.workflow.turn",
    # The operator contract.
    "SessionInput": "statecore.contract.session",
    "SendMessageInput": "statecore.contract.session",
    "TurnResult": "statecore.contract.session",
    "SessionReport": "statecore.contract.session",
    "DEFAULT_TASK_QUEUE": "statecore.contract.session",
    "WORKFLOW_TYPE": "statecore.contract.session",
    "workflow_id_for": "statecore.contract.session",
    # The data.
    "Message": "statecore.core.models",
    "StoredMessage": "statecore.core.models",
    "ToolCall": "statecore.core.models",
    "SessionRef": "statecore.core.models",
    "TokenUsage": "statecore.core.models",
    "KVEntry": "statecore.core.models",
    "ScopedState": "statecore.core.models",
    "FlowCheckpoint": "statecore.core.models",
    "StateOperationResult": "statecore.core.models",
    "SessionProfile": "statecore.core.profile",
    # Tools a workflow binds to a model call (see docs/tool_agent.md).
    "ToolBinding": "statecore.contract.activities",
    "ToolCallInput": "statecore.contract.activities",
    "ToolCallResult": "statecore.contract.activities",
    # Schema migrations (Alembic), for deployments that migrate apart from the workers.
    "upgrade_database": "statecore.store.migrate",
    "current_revision": "statecore.store.migrate",
    "HEAD_REVISION": "statecore.store.migrate",
    # Payload encryption: needs the optional `encryption` extra (cryptography).
    "EncryptionCodec": "statecore.temporal.encryption",
    "Keyring": "statecore.temporal.encryption",
    "encrypted_data_converter": "statecore.temporal.encryption",
    "generate_key": "statecore.temporal.encryption",
    # Storage.
    "StateStore": "statecore.store",
    "open_store": "statecore.store",
    "run_transaction": "statecore.store",
    # The change feed: every committed change, in order (docs/shared_state.md).
    "ChangeEvent": "statecore.core.change_events",
    "follow_events": "statecore.store.feed",
    "read_events": "statecore.store.feed",
    # Share tokens inside a turn (``turn.shares``).
    "SharedState": "statecore.workflow.shares",
    "SharedKV": "statecore.workflow.shares",
    # Models (the LLM kind).
    "ChatModel": "statecore.llm",
    "ModelRequest": "statecore.llm",
    "ModelResponse": "statecore.llm",
    "OfflineModel": "statecore.llm",
    "OpenAICompatibleModel": "statecore.llm",
    # Errors: the root and the families a program catches.
    "StatecoreError": "statecore.core.errors",
    "InvalidInputError": "statecore.core.errors",
    "ConflictError": "statecore.core.errors",
    "NotFoundError": "statecore.core.errors",
    "SessionNotFoundError": "statecore.core.errors",
    "SessionStateError": "statecore.core.errors",
    "SessionPausedError": "statecore.core.errors",
    "SessionClosedError": "statecore.core.errors",
    "SessionDrainingError": "statecore.core.errors",
    "ModelError": "statecore.core.errors",
    "ShareError": "statecore.core.errors",
}

# Spelled out (not derived from _EXPORTS) so tools that read __all__ statically see it;
# tests/test_public_api.py checks the two agree.
__all__ = [
    "DEFAULT_TASK_QUEUE",
    "HEAD_REVISION",
    "WORKFLOW_TYPE",
    "AgentSession",
    "AgentSessionClient",
    "ChangeEvent",
    "ChatModel",
    "ConflictError",
    "ConnectionConfig",
    "EncryptionCodec",
    "FlowCheckpoint",
    "InvalidInputError",
    "KVEntry",
    "Keyring",
    "Message",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "NotFoundError",
    "OfflineModel",
    "OpenAICompatibleModel",
    "ScopedState",
    "SendMessageInput",
    "SessionClosedError",
    "SessionDrainingError",
    "SessionInput",
    "SessionNotFoundError",
    "SessionPausedError",
    "SessionProfile",
    "SessionRef",
    "SessionReport",
    "SessionStateError",
    "ShareError",
    "SharedKV",
    "SharedState",
    "StateOperationResult",
    "StateStore",
    "StatecoreError",
    "StatecorePlugin",
    "StoredMessage",
    "TokenUsage",
    "ToolBinding",
    "ToolCall",
    "ToolCallInput",
    "ToolCallResult",
    "Turn",
    "TurnResult",
    "TurnSession",
    "WorkerConfig",
    "__version__",
    "current_revision",
    "encrypted_data_converter",
    "follow_events",
    "generate_key",
    "open_store",
    "read_events",
    "run_transaction",
    "run_worker",
    "upgrade_database",
    "workflow_id_for",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'statecore' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:
    from statecore.agent_session.workflow import AgentSession
    from statecore.contract.activities import ToolBinding, ToolCallInput, ToolCallResult
    from statecore.contract.session import (
        DEFAULT_TASK_QUEUE,
        WORKFLOW_TYPE,
        SendMessageInput,
        SessionInput,
        SessionReport,
        TurnResult,
        workflow_id_for,
    )
    from statecore.core.change_events import ChangeEvent
    from statecore.core.errors import (
        ConflictError,
        InvalidInputError,
        ModelError,
        NotFoundError,
        SessionClosedError,
        SessionDrainingError,
        SessionNotFoundError,
        SessionPausedError,
        SessionStateError,
        ShareError,
        StatecoreError,
    )
    from statecore.core.models import (
        FlowCheckpoint,
        KVEntry,
        Message,
        ScopedState,
        SessionRef,
        StateOperationResult,
        StoredMessage,
        TokenUsage,
        ToolCall,
    )
    from statecore.core.profile import SessionProfile
    from statecore.llm import (
        ChatModel,
        ModelRequest,
        ModelResponse,
        OfflineModel,
        OpenAICompatibleModel,
    )
    from statecore.store import StateStore, open_store, run_transaction
    from statecore.store.feed import follow_events, read_events
    from statecore.store.migrate import HEAD_REVISION, current_revision, upgrade_database
    from statecore.temporal.client import AgentSessionClient
    from statecore.temporal.connection import ConnectionConfig
    from statecore.temporal.encryption import (
        EncryptionCodec,
        Keyring,
        encrypted_data_converter,
        generate_key,
    )
    from statecore.temporal.plugin import StatecorePlugin
    from statecore.temporal.worker import run_worker
    from statecore.temporal.worker_config import WorkerConfig
    from statecore.workflow.shares import SharedKV, SharedState
    from statecore.workflow.turn import Turn, TurnSession
