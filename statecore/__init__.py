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
    "StatecorePlugin": "statecore.temporal._plugin",
    # Large payloads by reference in statecore's database (docs/large_values.md).
    "StatecoreBlobPlugin": "statecore.temporal._blob_driver",
    "StatecoreBlobDriver": "statecore.temporal._blob_driver",
    "with_blob_storage": "statecore.temporal._blob_driver",
    "sweep_blobs": "statecore.temporal._blob_driver",
    "AgentSessionClient": "statecore.temporal._client",
    "WorkerConfig": "statecore.temporal._worker_config",
    "run_worker": "statecore.temporal._worker",
    "ConnectionConfig": "statecore.temporal._connection",
    "AgentSession": "statecore.agent_session._workflow",
    # The turn API, for your own workflows.
    "TurnSession": "statecore.workflow._turn",
    "Turn": "statecore.workflow._turn",
    # The operator contract.
    "SessionInput": "statecore.contract._session",
    "SendMessageInput": "statecore.contract._session",
    "TurnResult": "statecore.contract._session",
    "SessionReport": "statecore.contract._session",
    "DEFAULT_TASK_QUEUE": "statecore.contract._session",
    "WORKFLOW_TYPE": "statecore.contract._session",
    "workflow_id_for": "statecore.contract._session",
    # The data.
    "Message": "statecore.core._models",
    "StoredMessage": "statecore.core._models",
    "ToolCall": "statecore.core._models",
    "SessionRef": "statecore.core._models",
    "TokenUsage": "statecore.core._models",
    "KVEntry": "statecore.core._models",
    "ScopedState": "statecore.core._models",
    "FlowCheckpoint": "statecore.core._models",
    "StateOperationResult": "statecore.core._models",
    "SessionProfile": "statecore.core._profile",
    # A turn runner of your own for StatecorePlugin(agents=...) (docs/openai_agents.md).
    "AgentTurnRunner": "statecore.operations._agent_turns",
    "AgentTurnRequest": "statecore.operations._agent_turns",
    "AgentTurnOutcome": "statecore.operations._agent_turns",
    # Tools a workflow binds to a model call (see docs/tool_agent.md).
    "ToolBinding": "statecore.contract._activities",
    "ToolCallInput": "statecore.contract._activities",
    "ToolCallResult": "statecore.contract._activities",
    # Schema migrations (Alembic), for deployments that migrate apart from the workers.
    "upgrade_database": "statecore.store._migrate",
    "current_revision": "statecore.store._migrate",
    "HEAD_REVISION": "statecore.store._migrate",
    # Payload encryption: needs the optional `encryption` extra (cryptography).
    "EncryptionCodec": "statecore.temporal._encryption",
    "Keyring": "statecore.temporal._encryption",
    "encrypted_data_converter": "statecore.temporal._encryption",
    "generate_key": "statecore.temporal._encryption",
    # Storage.
    "StateStore": "statecore.store",
    "open_store": "statecore.store",
    "run_transaction": "statecore.store",
    # The change feed: every committed change, in order (docs/shared_state.md).
    "ChangeEvent": "statecore.core._change_events",
    "follow_events": "statecore.store._feed",
    "read_events": "statecore.store._feed",
    # Share tokens inside a turn (``turn.shares``).
    "SharedState": "statecore.workflow._shares",
    "SharedKV": "statecore.workflow._shares",
    # Models (the LLM kind).
    "ChatModel": "statecore.llm",
    "ModelRequest": "statecore.llm",
    "ModelResponse": "statecore.llm",
    "OfflineModel": "statecore.llm",
    "OpenAICompatibleModel": "statecore.llm",
    # Errors: the whole tree (docs/errors.md), and the way back from a Temporal failure.
    "AgentRunError": "statecore.core._errors",
    "AlreadyExistsError": "statecore.core._errors",
    "BlobCorruptError": "statecore.core._errors",
    "BlobError": "statecore.core._errors",
    "BlobMissingError": "statecore.core._errors",
    "BlobStoreUnavailableError": "statecore.core._errors",
    "BlobTooLargeError": "statecore.core._errors",
    "BundleError": "statecore.core._errors",
    "CheckpointTooLargeError": "statecore.core._errors",
    "ConflictError": "statecore.core._errors",
    "ContentTooLargeError": "statecore.core._errors",
    "ContextBudgetError": "statecore.core._errors",
    "CorruptCheckpointError": "statecore.core._errors",
    "DatabaseUnavailableError": "statecore.core._errors",
    "DriverMissingError": "statecore.core._errors",
    "EmptyContentError": "statecore.core._errors",
    "InvalidIdentifierError": "statecore.core._errors",
    "InvalidInputError": "statecore.core._errors",
    "InvalidLimitError": "statecore.core._errors",
    "MigrationError": "statecore.core._errors",
    "ModelError": "statecore.core._errors",
    "ModelUnavailableError": "statecore.core._errors",
    "NotFoundError": "statecore.core._errors",
    "PayloadDecryptionError": "statecore.core._errors",
    "PayloadTooLargeError": "statecore.core._errors",
    "ResetRefusedError": "statecore.core._errors",
    "RevisionConflictError": "statecore.core._errors",
    "SessionClosedError": "statecore.core._errors",
    "SessionDrainingError": "statecore.core._errors",
    "SessionIdentityError": "statecore.core._errors",
    "SessionNotFoundError": "statecore.core._errors",
    "SessionPausedError": "statecore.core._errors",
    "SessionStateError": "statecore.core._errors",
    "ShareAccessError": "statecore.core._errors",
    "ShareError": "statecore.core._errors",
    "ShareExpiredError": "statecore.core._errors",
    "ShareInvalidatedError": "statecore.core._errors",
    "ShareRevokedError": "statecore.core._errors",
    "ShareTokenUnknownError": "statecore.core._errors",
    "StateTooLargeError": "statecore.core._errors",
    "StatecoreError": "statecore.core._errors",
    "TemporalRequestError": "statecore.core._errors",
    "UnknownAgentError": "statecore.core._errors",
    "UnknownEncodingError": "statecore.core._errors",
    "UnknownEncryptionKeyError": "statecore.core._errors",
    "UnknownOperationError": "statecore.core._errors",
    "UnknownStoreError": "statecore.core._errors",
    "UnknownStrategyError": "statecore.core._errors",
    "VersionConflictError": "statecore.core._errors",
    "from_failure": "statecore.errors",
}

# Spelled out (not derived from _EXPORTS) so tools that read __all__ statically see it;
# tests/test_public_api.py checks the two agree.
__all__ = [
    "DEFAULT_TASK_QUEUE",
    "HEAD_REVISION",
    "WORKFLOW_TYPE",
    "AgentRunError",
    "AgentSession",
    "AgentSessionClient",
    "AgentTurnOutcome",
    "AgentTurnRequest",
    "AgentTurnRunner",
    "AlreadyExistsError",
    "BlobCorruptError",
    "BlobError",
    "BlobMissingError",
    "BlobStoreUnavailableError",
    "BlobTooLargeError",
    "BundleError",
    "ChangeEvent",
    "ChatModel",
    "CheckpointTooLargeError",
    "ConflictError",
    "ConnectionConfig",
    "ContentTooLargeError",
    "ContextBudgetError",
    "CorruptCheckpointError",
    "DatabaseUnavailableError",
    "DriverMissingError",
    "EmptyContentError",
    "EncryptionCodec",
    "FlowCheckpoint",
    "InvalidIdentifierError",
    "InvalidInputError",
    "InvalidLimitError",
    "KVEntry",
    "Keyring",
    "Message",
    "MigrationError",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelUnavailableError",
    "NotFoundError",
    "OfflineModel",
    "OpenAICompatibleModel",
    "PayloadDecryptionError",
    "PayloadTooLargeError",
    "ResetRefusedError",
    "RevisionConflictError",
    "ScopedState",
    "SendMessageInput",
    "SessionClosedError",
    "SessionDrainingError",
    "SessionIdentityError",
    "SessionInput",
    "SessionNotFoundError",
    "SessionPausedError",
    "SessionProfile",
    "SessionRef",
    "SessionReport",
    "SessionStateError",
    "ShareAccessError",
    "ShareError",
    "ShareExpiredError",
    "ShareInvalidatedError",
    "ShareRevokedError",
    "ShareTokenUnknownError",
    "SharedKV",
    "SharedState",
    "StateOperationResult",
    "StateStore",
    "StateTooLargeError",
    "StatecoreBlobDriver",
    "StatecoreBlobPlugin",
    "StatecoreError",
    "StatecorePlugin",
    "StoredMessage",
    "TemporalRequestError",
    "TokenUsage",
    "ToolBinding",
    "ToolCall",
    "ToolCallInput",
    "ToolCallResult",
    "Turn",
    "TurnResult",
    "TurnSession",
    "UnknownAgentError",
    "UnknownEncodingError",
    "UnknownEncryptionKeyError",
    "UnknownOperationError",
    "UnknownStoreError",
    "UnknownStrategyError",
    "VersionConflictError",
    "WorkerConfig",
    "__version__",
    "current_revision",
    "encrypted_data_converter",
    "follow_events",
    "from_failure",
    "generate_key",
    "open_store",
    "read_events",
    "run_transaction",
    "run_worker",
    "sweep_blobs",
    "upgrade_database",
    "with_blob_storage",
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
    from statecore.agent_session._workflow import AgentSession
    from statecore.contract._activities import ToolBinding, ToolCallInput, ToolCallResult
    from statecore.contract._session import (
        DEFAULT_TASK_QUEUE,
        WORKFLOW_TYPE,
        SendMessageInput,
        SessionInput,
        SessionReport,
        TurnResult,
        workflow_id_for,
    )
    from statecore.core._change_events import ChangeEvent
    from statecore.core._errors import (
        AgentRunError,
        AlreadyExistsError,
        BlobCorruptError,
        BlobError,
        BlobMissingError,
        BlobStoreUnavailableError,
        BlobTooLargeError,
        BundleError,
        CheckpointTooLargeError,
        ConflictError,
        ContentTooLargeError,
        ContextBudgetError,
        CorruptCheckpointError,
        DatabaseUnavailableError,
        DriverMissingError,
        EmptyContentError,
        InvalidIdentifierError,
        InvalidInputError,
        InvalidLimitError,
        MigrationError,
        ModelError,
        ModelUnavailableError,
        NotFoundError,
        PayloadDecryptionError,
        PayloadTooLargeError,
        ResetRefusedError,
        RevisionConflictError,
        SessionClosedError,
        SessionDrainingError,
        SessionIdentityError,
        SessionNotFoundError,
        SessionPausedError,
        SessionStateError,
        ShareAccessError,
        ShareError,
        ShareExpiredError,
        ShareInvalidatedError,
        ShareRevokedError,
        ShareTokenUnknownError,
        StatecoreError,
        StateTooLargeError,
        TemporalRequestError,
        UnknownAgentError,
        UnknownEncodingError,
        UnknownEncryptionKeyError,
        UnknownOperationError,
        UnknownStoreError,
        UnknownStrategyError,
        VersionConflictError,
    )
    from statecore.core._models import (
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
    from statecore.core._profile import SessionProfile
    from statecore.errors import from_failure
    from statecore.llm import (
        ChatModel,
        ModelRequest,
        ModelResponse,
        OfflineModel,
        OpenAICompatibleModel,
    )
    from statecore.operations._agent_turns import (
        AgentTurnOutcome,
        AgentTurnRequest,
        AgentTurnRunner,
    )
    from statecore.store import StateStore, open_store, run_transaction
    from statecore.store._feed import follow_events, read_events
    from statecore.store._migrate import HEAD_REVISION, current_revision, upgrade_database
    from statecore.temporal._blob_driver import (
        StatecoreBlobDriver,
        StatecoreBlobPlugin,
        sweep_blobs,
        with_blob_storage,
    )
    from statecore.temporal._client import AgentSessionClient
    from statecore.temporal._connection import ConnectionConfig
    from statecore.temporal._encryption import (
        EncryptionCodec,
        Keyring,
        encrypted_data_converter,
        generate_key,
    )
    from statecore.temporal._plugin import StatecorePlugin
    from statecore.temporal._worker import run_worker
    from statecore.temporal._worker_config import WorkerConfig
    from statecore.workflow._shares import SharedKV, SharedState
    from statecore.workflow._turn import Turn, TurnSession
