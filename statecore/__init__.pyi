"""The type checkers' view of statecore/__init__.py, whose names load on first use.

Generated from its export table by ``python -m tests.public_stub``; do not edit.
"""

from statecore.agent_session._workflow import (
    AgentSession as AgentSession,
)
from statecore.contract._activities import (
    ToolBinding as ToolBinding,
    ToolCallInput as ToolCallInput,
    ToolCallResult as ToolCallResult,
)
from statecore.contract._session import (
    DEFAULT_TASK_QUEUE as DEFAULT_TASK_QUEUE,
    SendMessageInput as SendMessageInput,
    SessionInput as SessionInput,
    SessionReport as SessionReport,
    TurnResult as TurnResult,
    workflow_id_for as workflow_id_for,
    WORKFLOW_TYPE as WORKFLOW_TYPE,
)
from statecore.contract._streams import (
    FinalEvent as FinalEvent,
    RestartedEvent as RestartedEvent,
    StreamPosition as StreamPosition,
    TextEvent as TextEvent,
    ToolCallEvent as ToolCallEvent,
    TurnEvent as TurnEvent,
)
from statecore.core._change_events import (
    ChangeEvent as ChangeEvent,
)
from statecore.core._models import (
    FlowCheckpoint as FlowCheckpoint,
    KVEntry as KVEntry,
    Message as Message,
    ScopedState as ScopedState,
    SessionRef as SessionRef,
    StateOperationResult as StateOperationResult,
    StoredMessage as StoredMessage,
    TokenUsage as TokenUsage,
    ToolCall as ToolCall,
)
from statecore.core._profile import (
    SessionProfile as SessionProfile,
)
from statecore.errors import (
    AgentRunError as AgentRunError,
    AlreadyExistsError as AlreadyExistsError,
    BlobCorruptError as BlobCorruptError,
    BlobError as BlobError,
    BlobMissingError as BlobMissingError,
    BlobStoreUnavailableError as BlobStoreUnavailableError,
    BlobTooLargeError as BlobTooLargeError,
    BundleError as BundleError,
    CheckpointTooLargeError as CheckpointTooLargeError,
    ConflictError as ConflictError,
    ContentTooLargeError as ContentTooLargeError,
    ContextBudgetError as ContextBudgetError,
    CorruptCheckpointError as CorruptCheckpointError,
    DatabaseUnavailableError as DatabaseUnavailableError,
    DriverMissingError as DriverMissingError,
    EmptyContentError as EmptyContentError,
    from_failure as from_failure,
    InvalidIdentifierError as InvalidIdentifierError,
    InvalidInputError as InvalidInputError,
    InvalidLimitError as InvalidLimitError,
    MigrationError as MigrationError,
    ModelError as ModelError,
    ModelUnavailableError as ModelUnavailableError,
    NotFoundError as NotFoundError,
    PayloadDecryptionError as PayloadDecryptionError,
    PayloadTooLargeError as PayloadTooLargeError,
    ResetRefusedError as ResetRefusedError,
    RevisionConflictError as RevisionConflictError,
    SessionClosedError as SessionClosedError,
    SessionDrainingError as SessionDrainingError,
    SessionIdentityError as SessionIdentityError,
    SessionNotFoundError as SessionNotFoundError,
    SessionPausedError as SessionPausedError,
    SessionStateError as SessionStateError,
    ShareAccessError as ShareAccessError,
    ShareError as ShareError,
    ShareExpiredError as ShareExpiredError,
    ShareInvalidatedError as ShareInvalidatedError,
    ShareRevokedError as ShareRevokedError,
    ShareTokenUnknownError as ShareTokenUnknownError,
    StatecoreError as StatecoreError,
    StateTooLargeError as StateTooLargeError,
    TemporalRequestError as TemporalRequestError,
    TurnNotFoundError as TurnNotFoundError,
    UnknownAgentError as UnknownAgentError,
    UnknownEncodingError as UnknownEncodingError,
    UnknownEncryptionKeyError as UnknownEncryptionKeyError,
    UnknownOperationError as UnknownOperationError,
    UnknownStoreError as UnknownStoreError,
    UnknownStrategyError as UnknownStrategyError,
    VersionConflictError as VersionConflictError,
)
from statecore.llm import (
    ChatModel as ChatModel,
    ModelRequest as ModelRequest,
    ModelResponse as ModelResponse,
    OfflineModel as OfflineModel,
    OpenAICompatibleModel as OpenAICompatibleModel,
)
from statecore.operations._agent_turns import (
    AgentTurnOutcome as AgentTurnOutcome,
    AgentTurnRequest as AgentTurnRequest,
    AgentTurnRunner as AgentTurnRunner,
)
from statecore.store import (
    open_store as open_store,
    run_transaction as run_transaction,
    StateStore as StateStore,
)
from statecore.store._feed import (
    follow_events as follow_events,
    read_events as read_events,
)
from statecore.store._migrate import (
    current_revision as current_revision,
    HEAD_REVISION as HEAD_REVISION,
    upgrade_database as upgrade_database,
)
from statecore.temporal._blob_driver import (
    StatecoreBlobDriver as StatecoreBlobDriver,
    StatecoreBlobPlugin as StatecoreBlobPlugin,
    sweep_blobs as sweep_blobs,
    with_blob_storage as with_blob_storage,
)
from statecore.temporal._client import (
    AgentSessionClient as AgentSessionClient,
)
from statecore.temporal._connection import (
    ConnectionConfig as ConnectionConfig,
)
from statecore.temporal._encryption import (
    encrypted_data_converter as encrypted_data_converter,
    EncryptionCodec as EncryptionCodec,
    generate_key as generate_key,
    Keyring as Keyring,
)
from statecore.temporal._plugin import (
    StatecorePlugin as StatecorePlugin,
)
from statecore.temporal._worker import (
    run_worker as run_worker,
)
from statecore.temporal._worker_config import (
    WorkerConfig as WorkerConfig,
)
from statecore.workflow._shares import (
    SharedKV as SharedKV,
    SharedState as SharedState,
)
from statecore.workflow._turn import (
    Turn as Turn,
    TurnSession as TurnSession,
)

__version__: str
__all__: list[str]
