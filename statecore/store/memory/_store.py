"""MemoryStateStore: the reference backend, and its transactions."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime

from statecore.core._errors import StatecoreError
from statecore.core._limits import DEFAULT_SESSION_TTL_SECONDS
from statecore.core._tokens import TokenCounter
from statecore.store._base import Clock, StateStore, StoreTransaction
from statecore.store._inputs import check_aware, check_flag, check_ttl_seconds
from statecore.store.memory._context import TxContext
from statecore.store.memory._conversation import MemoryConversationStore
from statecore.store.memory._events import MemoryEventStore
from statecore.store.memory._flow import MemoryFlowStore
from statecore.store.memory._kv import MemoryKVStore
from statecore.store.memory._orchestration import MemoryOrchestrationStore
from statecore.store.memory._schema import MemoryData, Workspace
from statecore.store.memory._scoped_state import MemoryScopedStateStore
from statecore.store.memory._sessions import MemorySessionStore
from statecore.store.memory._turn_records import MemoryTurnRecordStore
from statecore.store.memory._turn_streams import MemoryTurnStreams

# Stores whose transaction is open in the current task: a nested transaction() would wait
# forever for the lock its own caller holds, so it fails fast instead.
_open_in_task: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "statecore_memory_open_transactions", default=frozenset()
)


def utc_now() -> datetime:
    return datetime.now(UTC)


class MemoryTransaction(StoreTransaction):
    """The modules bound to one memory transaction."""

    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx
        self.events = MemoryEventStore(ctx)
        self.sessions = MemorySessionStore(ctx)
        self.conversation = MemoryConversationStore(ctx)
        self.kv = MemoryKVStore(ctx)
        self.turns = MemoryTurnRecordStore(ctx)
        self.state = MemoryScopedStateStore(ctx)
        self.flow = MemoryFlowStore(ctx)
        self.orchestration = MemoryOrchestrationStore(ctx)
        self.open_change_ledger()

    @property
    def now(self) -> datetime:
        return self._ctx.now


class MemoryStateStore(StateStore):
    """Everything in process memory; the reference implementation of the storage contract.

    Transactions are serialised by one lock and work on a copy-on-write view, so a block's
    writes appear together at its end and vanish if it raises. Data is lost with the process:
    use it for tests, demos and as the behaviour every SQL backend must match."""

    dialect = "memory"

    def __init__(
        self,
        *,
        token_counter: TokenCounter | None = None,
        clock: Clock | None = None,
        default_ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS,
    ) -> None:
        self._counter = token_counter if token_counter is not None else TokenCounter()
        self._clock: Clock = clock if clock is not None else utc_now
        self._default_ttl = int(check_ttl_seconds(default_ttl_seconds, "default_ttl_seconds"))
        self._data = MemoryData()
        self._lock = asyncio.Lock()
        self._closed = False
        self._streams = MemoryTurnStreams(
            lambda ref: (ref.namespace, ref.agent_id, ref.session_id) in self._data.sessions
        )

    @property
    def turn_streams(self) -> MemoryTurnStreams:
        return self._streams

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[StoreTransaction]:
        if self._closed:
            raise StatecoreError("this store is closed; open a new one")
        if id(self) in _open_in_task.get():
            raise StatecoreError(
                "a transaction of this store is already open in this task; use the modules "
                "of the open transaction instead of nesting transaction() blocks"
            )
        async with self._lock:
            token = _open_in_task.set(_open_in_task.get() | {id(self)})
            workspace = Workspace(self._data)
            ctx = TxContext(
                workspace, check_aware(self._clock(), "clock()"), self._counter, self._default_ttl
            )
            try:
                tx = MemoryTransaction(ctx)
                yield tx
                await tx.record_unclaimed_changes()
                # Synchronous from here to the end: nothing else can observe half a commit.
                workspace.commit()
            finally:
                ctx.open = False
                _open_in_task.reset(token)

    def transaction(
        self, *, read_only: bool = False
    ) -> AbstractAsyncContextManager[StoreTransaction]:
        """Open a transaction: ``async with store.transaction() as tx: ...``. Transactions
        here take turns whether they write or not, so ``read_only`` changes nothing."""
        check_flag(read_only, "read_only")
        return self._transaction()

    async def close(self) -> None:
        self._closed = True
