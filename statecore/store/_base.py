"""The storage contract: what every backend (memory, SQLite, PostgreSQL, MariaDB) provides.

Work happens inside a transaction::

    async with store.transaction() as tx:
        await tx.sessions.ensure(ref)
        await tx.conversation.append(ref, turn_id, messages)
        await tx.kv.put(ref.kv_scope, "prefs", "theme", "dark")

Everything written inside one ``transaction()`` block commits together when the block exits
normally and is rolled back when it raises: the Temporal layer commits a whole turn this way.
Module objects are only valid inside their block. Methods validate their input and raise
``statecore.core._errors`` types; a failed call inside a block leaves the block usable only for
rollback (raise out of it).

A SQL transaction that races with others can lose with a transient conflict: a deadlock, a
serialization failure, a lock wait timeout, SQLite's "database is locked". The database has
then rolled the whole transaction back, and running it again can succeed::

    revision = await run_transaction(store, lambda tx: tx.kv.put(scope, "b", "k", 1))

``statecore.store.run_transaction(store, work)`` runs ``await work(tx)`` in a transaction and,
on a transient conflict (``StateStore.is_transient_error``), runs it again in a fresh one after
a short jittered pause. ``work`` must be safe to re-run: it is when everything it changes goes
through ``tx`` (a rolled-back transaction left nothing behind) and it has no other side effect.
Any other error is raised at once, and the last conflict once the attempts are used up.

The memory backend is the reference implementation; the conformance suite in ``tests/store/``
(``test_conversation.py``, ``test_kv.py``, ``test_bad_input.py``, ...) is the contract's
executable form and runs against every backend.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from statecore.core._change_events import ChangeEvent, NewEvent
from statecore.core._errors import StatecoreError
from statecore.core._identifiers import validate_turn_id
from statecore.core._models import (
    OrchestrationState,
    OrchestrationUpdate,
    SessionInfo,
    SessionRef,
    TokenUsage,
)
from statecore.store import _change_ledger as change_ledger
from statecore.store import _change_rules as changes
from statecore.store._change_ledger import ChangeLedger, RecordsChanges
from statecore.store._conversation_contract import ConversationStore
from statecore.store._inputs import (
    check_flag,
    check_ref,
)
from statecore.store._kv_contract import KVStore
from statecore.store._signals import WakeSignal, polling
from statecore.store._state_contracts import FlowStore, ScopedStateStore
from statecore.store._turn_streams import TurnStreamStore

Clock = Callable[[], datetime]


class SessionStore(RecordsChanges, abc.ABC, changes=changes.SESSIONS):
    """Session header rows. Every other per-session module requires the session to exist
    (``ensure`` it first); they raise SessionNotFoundError otherwise."""

    @abc.abstractmethod
    async def ensure(self, ref: SessionRef, *, ttl_seconds: int | None = None) -> SessionInfo:
        """Create the session if missing (touching ``last_accessed`` either way) and return it.
        ``ttl_seconds`` sets the idle TTL when given; otherwise a new session gets the store's
        default and an existing one keeps its own."""

    @abc.abstractmethod
    async def get(self, ref: SessionRef) -> SessionInfo | None: ...

    @abc.abstractmethod
    async def touch(self, ref: SessionRef) -> None:
        """Move ``last_accessed`` to now (the idle TTL restarts)."""

    @abc.abstractmethod
    async def list(
        self,
        namespace: str,
        *,
        agent_id: str | None = None,
        limit: int = 100,
        after: SessionRef | None = None,
    ) -> list[SessionRef]:
        """Sessions of a namespace ordered by (agent_id, session_id), paginated by ``after``."""

    @abc.abstractmethod
    async def expired(self, now: datetime, *, limit: int = 1000) -> builtins.list[SessionRef]:
        """Sessions whose ``last_accessed + ttl_seconds`` is before ``now``, any namespace.
        The SQL store may find a session up to a 64th of its TTL (a minute at most) after
        that moment, never before it (``statecore.store.sql._session_expiry``)."""

    @abc.abstractmethod
    async def delete(self, ref: SessionRef) -> bool:
        """Delete the session and every row it owns (conversation, hints, summary, turn
        records, flow, orchestration, KV/tools/task rows owned by ``ref.owner``, and the
        scoped state of (task_id=session_id, agent_id)). Returns False if it did not exist."""

    @abc.abstractmethod
    async def delete_namespace(self, namespace: str) -> int:
        """Delete every row of the namespace (sessions, namespace-wide KV, scoped states).
        Returns the number of sessions removed."""

    @abc.abstractmethod
    async def namespaces(self) -> builtins.list[str]:
        """Every namespace that has at least one session, KV entry or scoped state."""


class TurnRecordStore(RecordsChanges, abc.ABC, changes=changes.TURNS):
    """One record per committed turn of a session (``statecore.operations._turn_record``), keyed by
    turn id: what makes a turn's commit idempotent. A record is a JSON value, written once."""

    @abc.abstractmethod
    async def get(self, ref: SessionRef, turn_id: str) -> Any | None:
        """The record of ``turn_id``, or None (also when the session does not exist)."""

    @abc.abstractmethod
    async def insert(self, ref: SessionRef, turn_id: str, value: Any) -> None:
        """Store the record of a turn that has none. RevisionConflictError (nothing written)
        when the turn already has one, committed by a concurrent attempt included: the
        caller's transaction must then roll back whole."""

    @abc.abstractmethod
    async def count(self, ref: SessionRef) -> int:
        """Records of the session (0 when it does not exist)."""

    @abc.abstractmethod
    async def records(self, ref: SessionRef) -> list[tuple[str, Any]]:
        """Every (turn_id, record) of the session in ascending turn id order (export)."""

    @abc.abstractmethod
    async def restore(self, ref: SessionRef, records: Sequence[tuple[str, Any]]) -> None:
        """Write exported records verbatim; a turn id that has a record gets the new one."""

    @abc.abstractmethod
    async def clear(self, ref: SessionRef) -> int:
        """Delete every record of the session; returns how many."""


class OrchestrationStore(RecordsChanges, abc.ABC, changes=changes.ORCHESTRATION):
    """A session's orchestration state. ``last_accessed`` and ``ttl_seconds`` are
    the session's own (one idle clock per session)."""

    @abc.abstractmethod
    async def get(self, ref: SessionRef) -> OrchestrationState | None: ...

    @abc.abstractmethod
    async def get_or_create(self, ref: SessionRef) -> OrchestrationState: ...

    @abc.abstractmethod
    async def update(self, ref: SessionRef, update: OrchestrationUpdate) -> OrchestrationState:
        """Apply the non-None fields; returns the new state (creating it if needed)."""

    @abc.abstractmethod
    async def set_active_step(self, ref: SessionRef, step: str | None) -> OrchestrationState: ...

    @abc.abstractmethod
    async def add_used_tool(self, ref: SessionRef, tool: str) -> OrchestrationState:
        """Move/append ``tool`` to the end of ``recently_used_tools`` (distinct, at most
        MAX_RECENT_TOOLS, oldest dropped)."""

    @abc.abstractmethod
    async def advance_sequence(self, ref: SessionRef) -> OrchestrationState: ...

    @abc.abstractmethod
    async def add_token_usage(
        self, ref: SessionRef, prompt_tokens: int, completion_tokens: int
    ) -> OrchestrationState: ...

    async def count_token_usage(
        self, ref: SessionRef, prompt_tokens: int, completion_tokens: int
    ) -> None:
        """``add_token_usage`` for a caller that does not need the new state back (a turn's
        commit): a backend may then add in place without reading the row first."""
        await self.add_token_usage(ref, prompt_tokens, completion_tokens)

    @abc.abstractmethod
    async def reset(self, ref: SessionRef) -> bool:
        """Back to defaults (the row is removed); True if there was state."""

    @abc.abstractmethod
    async def restore(self, ref: SessionRef, state: OrchestrationState) -> None: ...


class EventStore(RecordsChanges, abc.ABC, changes=changes.EVENTS):
    """The change feed of each namespace (``statecore.core._change_events``)."""

    @abc.abstractmethod
    async def append(self, namespace: str, events: Sequence[NewEvent]) -> int:
        """Record ``events`` in this transaction, numbered after the namespace's last event;
        returns the first number (0 when ``events`` is empty). The numbers become visible
        with the commit, in commit order and without gaps."""

    @abc.abstractmethod
    async def read(self, namespace: str, *, after: int = 0, limit: int = 500) -> list[ChangeEvent]:
        """Events with ``seq > after``, ascending, at most ``limit`` (1..1000)."""

    @abc.abstractmethod
    async def last_seq(self, namespace: str) -> int:
        """The number of the namespace's newest event (0 before the first)."""

    @abc.abstractmethod
    async def sweep(
        self,
        *,
        older_than: datetime | None = None,
        keep_last: int | None = None,
        namespace: str | None = None,
    ) -> int:
        """Delete events committed before ``older_than`` and/or all but the newest
        ``keep_last`` of each namespace (one namespace, or every one). Numbering continues
        where it was: a swept feed never reuses a number. Returns how many were deleted."""


class RestartTransaction(Exception):
    """A store's word that this transaction wrote nothing and must run again from the start,
    where it will not take the same shortcut (``StoreTransaction.begin_turn``'s
    ``messages_only``). ``run_transaction`` runs the work again at once; only a caller that
    asks for that shortcut itself, outside ``run_transaction``, ever sees it."""


class StoreTransaction(RecordsChanges, abc.ABC, changes=changes.TRANSACTION):
    """The modules, bound to one open transaction."""

    events: EventStore
    sessions: SessionStore
    conversation: ConversationStore
    kv: KVStore
    turns: TurnRecordStore
    state: ScopedStateStore
    flow: FlowStore
    orchestration: OrchestrationStore

    @property
    @abc.abstractmethod
    def now(self) -> datetime:
        """The time this transaction is stamped with (the store's clock, read once)."""

    def open_change_ledger(self) -> None:
        """Note this transaction's changes from now on (``statecore.store._change_ledger``):
        a backend calls it once its modules exist."""
        ledger = ChangeLedger()
        change_ledger.attach(
            ledger,
            [
                *(self, self.events, self.sessions, self.conversation, self.kv, self.turns),
                *(self.state, self.flow, self.orchestration),
            ],
        )

    async def record_unclaimed_changes(self) -> None:
        """Record the changes no event describes yet, in this transaction: a backend calls
        it last before committing, so every commit, whichever door it came through, carries
        the events of what it changed."""
        ledger = self._ledger
        if ledger is None or not ledger.noted:
            return
        for namespace, events in sorted(ledger.describe(self.now).items()):
            await self.events.append(namespace, events)

    async def begin_turn(
        self, ref: SessionRef, turn_id: str, *, messages_only: bool = False
    ) -> SessionInfo:
        """A turn commit's first write: ``sessions.ensure(ref)``, knowing that turn
        ``turn_id``'s messages come next. A backend that can learn in the same read whether
        the turn has messages already does (SQL: an append need not look them up); what it
        writes is the same.

        ``messages_only``: the caller promises that between here and ``finish_turn`` it only
        appends the turn's messages (at least one) and reads. A backend may then hold every
        write back and send it all with ``finish_turn`` (PostgreSQL: one statement, see
        ``statecore.store.sql._turn_commit``); when that cannot be done it raises
        ``RestartTransaction`` having written nothing, and ``run_transaction`` runs the
        work again."""
        check_ref(ref)
        validate_turn_id(turn_id)
        check_flag(messages_only, "messages_only")
        self.conversation._opened_turn_id = turn_id
        return await self._begin_turn(ref, turn_id, messages_only)

    async def _begin_turn(self, ref: SessionRef, turn_id: str, messages_only: bool) -> SessionInfo:
        """``begin_turn`` once its arguments are checked: a backend with a shortcut overrides
        it."""
        return await self.sessions.ensure(ref)

    async def finish_turn(
        self,
        ref: SessionRef,
        turn_id: str,
        record: Any,
        marker: tuple[str, str, Any],
        events: Sequence[NewEvent],
        usage: TokenUsage | None = None,
    ) -> None:
        """A turn commit's last writes, in this order: the model's token ``usage`` added to
        the session's totals (``orchestration.count_token_usage``, when it has any), the
        turn's record (``turns.insert``: RevisionConflictError when the turn already has
        one, and the transaction must roll back whole), a KV put of ``marker`` (bucket, key,
        value) in the session's scope, and the turn's change-feed ``events``. A backend that
        can send them together does (PostgreSQL: one statement); what they write is the
        same."""
        if usage is not None and usage.total_tokens:
            await self.orchestration.count_token_usage(
                ref, usage.prompt_tokens, usage.completion_tokens
            )
        await self.turns.insert(ref, turn_id, record)
        bucket, key, value = marker
        await self.kv.put(ref.kv_scope, bucket, key, value)
        await self.events.append(ref.namespace, events)


class StateStore(abc.ABC):
    """A backend. Create once per process; ``close()`` releases connections."""

    dialect: str

    @abc.abstractmethod
    def transaction(
        self, *, read_only: bool = False
    ) -> AbstractAsyncContextManager[StoreTransaction]:
        """``async with store.transaction() as tx``: commits when the block ends, rolls back
        when it raises. ``read_only`` promises the block only reads, which lets a backend
        run it beside writers (SQLite: without taking the write lock)."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    def new_events_signal(
        self, namespace: str, *, poll_interval: float
    ) -> AbstractAsyncContextManager[WakeSignal]:
        """What a feed reader waits on between reads: by default a timer of
        ``poll_interval`` seconds; a backend that can push (PostgreSQL) wakes it instead."""
        return polling(poll_interval)

    @property
    def turn_streams(self) -> TurnStreamStore:
        """The stream rows of running turns (``statecore.store._turn_streams``): what a turn's
        model call has written so far, for readers in any process. Every backend statecore
        ships has them; a store of another kind says it has none."""
        raise StatecoreError(f"this store ({type(self).__name__}) keeps no turn streams")

    def is_transient_error(self, error: BaseException) -> bool:
        """True when ``error``, raised out of one of this store's transaction blocks, is a
        transient conflict: the transaction was rolled back whole and running it again may
        succeed (see ``run_transaction``). The memory backend never has one."""
        return False


async def _aiter_pages(store: StateStore, namespace: str) -> AsyncIterator[SessionRef]:
    """Every session of a namespace, one page per transaction (used by namespace-wide ops)."""
    after: SessionRef | None = None
    while True:
        async with store.transaction() as tx:
            page = await tx.sessions.list(namespace, limit=500, after=after)
        for ref in page:
            yield ref
        if len(page) < 500:
            return
        after = page[-1]


iter_sessions = _aiter_pages
