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
    "WorkerConfig": "statecore.temporal.worker",
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
    "EncryptionCodec": "statecore.encryption.codec",
    "Keyring": "statecore.encryption.codec",
    "encrypted_data_converter": "statecore.encryption.codec",
    "generate_key": "statecore.encryption.codec",
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
    # Errors: the whole tree (docs/errors.md), and the way back from a Temporal failure.
    "AgentRunError": "statecore.core.errors",
    "AlreadyExistsError": "statecore.core.errors",
    "BundleError": "statecore.core.errors",
    "CheckpointTooLargeError": "statecore.core.errors",
    "ConflictError": "statecore.core.errors",
    "ContentTooLargeError": "statecore.core.errors",
    "ContextBudgetError": "statecore.core.errors",
    "CorruptCheckpointError": "statecore.core.errors",
    "DatabaseUnavailableError": "statecore.core.errors",
    "DriverMissingError": "statecore.core.errors",
    "EmptyContentError": "statecore.core.errors",
    "InvalidIdentifierError": "statecore.core.errors",
    "InvalidInputError": "statecore.core.errors",
    "InvalidLimitError": "statecore.core.errors",
    "MigrationError": "statecore.core.errors",
    "ModelError": "statecore.core.errors",
    "ModelUnavailableError": "statecore.core.errors",
    "NotFoundError": "statecore.core.errors",
    "PayloadDecryptionError": "statecore.core.errors",
    "PayloadTooLargeError": "statecore.core.errors",
    "ResetRefusedError": "statecore.core.errors",
    "RevisionConflictError": "statecore.core.errors",
    "SessionClosedError": "statecore.core.errors",
    "SessionDrainingError": "statecore.core.errors",
    "SessionIdentityError": "statecore.core.errors",
    "SessionNotFoundError": "statecore.core.errors",
    "SessionPausedError": "statecore.core.errors",
    "SessionStateError": "statecore.core.errors",
    "ShareAccessError": "statecore.core.errors",
    "ShareError": "statecore.core.errors",
    "ShareExpiredError": "statecore.core.errors",
    "ShareInvalidatedError": "statecore.core.errors",
    "ShareRevokedError": "statecore.core.errors",
    "ShareTokenUnknownError": "statecore.core.errors",
    "StateTooLargeError": "statecore.core.errors",
    "StatecoreError": "statecore.core.errors",
    "TemporalRequestError": "statecore.core.errors",
    "UnknownAgentError": "statecore.core.errors",
    "UnknownEncodingError": "statecore.core.errors",
    "UnknownEncryptionKeyError": "statecore.core.errors",
    "UnknownOperationError": "statecore.core.errors",
    "UnknownStoreError": "statecore.core.errors",
    "UnknownStrategyError": "statecore.core.errors",
    "VersionConflictError": "statecore.core.errors",
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
    "AlreadyExistsError",
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
        AgentRunError,
        AlreadyExistsError,
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
    from statecore.encryption.codec import (
        EncryptionCodec,
        Keyring,
        encrypted_data_converter,
        generate_key,
    )
    from statecore.errors import from_failure
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
    from statecore.temporal.plugin import StatecorePlugin
    from statecore.temporal.worker import WorkerConfig, run_worker
    from statecore.workflow.shares import SharedKV, SharedState
    from statecore.workflow.turn import Turn, TurnSession
