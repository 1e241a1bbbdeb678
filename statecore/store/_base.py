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
    FlowCheckpoint,
    Hint,
    KeyPage,
    KVEntry,
    KVScope,
    OrchestrationState,
    OrchestrationUpdate,
    ScopedState,
    SessionInfo,
    SessionRef,
    StoredMessage,
    Summary,
    TokenUsage,
    validate_identifier,
    validate_key,
    validate_prefix,
    validate_text,
)
from statecore.core._models import Message as NewMessage
from statecore.store import _change_ledger as change_ledger
from statecore.store import _change_rules as changes
from statecore.store._change_ledger import ChangeLedger, RecordsChanges
from statecore.store._inputs import (
    KVPut,
    RestoredKV,
    RestoredState,
    RestoreExtras,
    check_aware,
    check_flag,
    check_int,
    check_kv_key,
    check_message_range,
    check_page_limit,
    check_ref,
    check_scope,
    check_state_scope,
    check_token_budget,
    checked_append,
    checked_flow_checkpoints,
    checked_flow_save,
    checked_kv_entries,
    checked_kv_put,
    checked_log,
    checked_restore_extras,
    checked_states,
    encode_state,
)
from statecore.store._signals import WakeSignal, polling
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


class ConversationStore(RecordsChanges, abc.ABC, changes=changes.CONVERSATION):
    """The message log of a session, plus system prompt, hints, summary and window start."""

    #: The turn id ``StoreTransaction.begin_turn`` checked in this transaction: that turn's
    #: append does not check it again.
    _opened_turn_id: str | None = None

    async def append(
        self, ref: SessionRef, turn_id: str, messages: Sequence[NewMessage], *, start_index: int = 0
    ) -> list[StoredMessage]:
        """Append ``messages`` as indexes ``start_index, start_index+1, ...`` of turn ``turn_id``.

        Idempotent on (session, turn_id, index): an index already stored is not stored again,
        and the stored message is returned in its place. Tokens are counted here, once, with
        the store's TokenCounter. Sequence numbers increase by one per stored message.
        """
        id_checked = type(turn_id) is str and turn_id == self._opened_turn_id
        checked = checked_append(ref, turn_id, messages, start_index, id_checked=id_checked)
        return await self._append(ref, turn_id, checked, start_index)

    @abc.abstractmethod
    async def _append(
        self, ref: SessionRef, turn_id: str, messages: list[NewMessage], start_index: int
    ) -> list[StoredMessage]:
        """``append`` once its arguments are checked: the backend's own work."""

    async def turn_messages(self, ref: SessionRef, turn_id: str) -> list[StoredMessage]:
        """Messages stored for one turn, by index."""
        check_ref(ref)
        validate_turn_id(turn_id)
        return await self._turn_messages(ref, turn_id)

    @abc.abstractmethod
    async def _turn_messages(self, ref: SessionRef, turn_id: str) -> list[StoredMessage]: ...

    async def messages(
        self,
        ref: SessionRef,
        *,
        from_seq: int | None = None,
        to_seq: int | None = None,
        limit: int | None = None,
        include_retracted: bool = False,
    ) -> list[StoredMessage]:
        """Messages with ``from_seq <= seq <= to_seq`` in ascending seq order, at most
        ``limit`` of them (the first ones). Retracted messages are left out unless
        ``include_retracted`` (inspection and audit)."""
        check_message_range(ref, from_seq, to_seq, limit)
        check_flag(include_retracted, "include_retracted")
        return await self._messages(ref, from_seq, to_seq, limit, include_retracted)

    @abc.abstractmethod
    async def _messages(
        self,
        ref: SessionRef,
        from_seq: int | None,
        to_seq: int | None,
        limit: int | None,
        include_retracted: bool,
    ) -> list[StoredMessage]: ...

    async def tokens_before(self, ref: SessionRef, seq: int) -> int | None:
        """The log's running token total just before its first message at or after ``seq``
        that is not retracted, or None when there is none: what the tokens of a window
        starting at ``seq`` are counted from (the session's ``token_total`` minus this)."""
        check_ref(ref)
        return await self._tokens_before(ref, check_int(seq, "seq"))

    async def _tokens_before(self, ref: SessionRef, seq: int) -> int | None:
        first = await self._messages(ref, seq, None, 1, False)
        return first[0].cumulative_tokens - first[0].tokens if first else None

    async def retract_last(self, ref: SessionRef) -> StoredMessage | None:
        """Take back the newest message that is not retracted yet and return it (None when
        there is none). Nothing is deleted, and the counters and running totals stay as they
        were: the row is marked, and ``messages``, ``tail`` and everything built on them (the
        context window, export) skip it from now on. Only ``clear`` (a reset) removes it."""
        check_ref(ref)
        return await self._retract_last(ref)

    @abc.abstractmethod
    async def _retract_last(self, ref: SessionRef) -> StoredMessage | None: ...

    async def retracted(self, ref: SessionRef) -> dict[int, datetime]:
        """The retracted messages' seqs, ascending, with the time each was retracted."""
        check_ref(ref)
        return await self._retracted(ref)

    @abc.abstractmethod
    async def _retracted(self, ref: SessionRef) -> dict[int, datetime]: ...

    async def tail(
        self, ref: SessionRef, *, max_tokens: int | None = None, max_messages: int | None = None
    ) -> list[StoredMessage]:
        """The newest messages at or after the window start whose token sum fits
        ``max_tokens`` and whose count fits ``max_messages``, ascending, retracted ones left
        out (their tokens still count against ``max_tokens``). Uses the stored
        cumulative token totals: one indexed query, no re-tokenisation, no full scan."""
        check_ref(ref)
        if max_tokens is not None:
            check_token_budget(max_tokens)
        if max_messages is not None:
            check_page_limit(max_messages, "max_messages")
        return await self._tail(ref, max_tokens, max_messages)

    @abc.abstractmethod
    async def _tail(
        self, ref: SessionRef, max_tokens: int | None, max_messages: int | None
    ) -> list[StoredMessage]: ...

    async def set_system_prompt(self, ref: SessionRef, text: str | None) -> None:
        check_ref(ref)
        if text is not None:
            validate_text(text, "system prompt", allow_empty=False)
        await self._set_system_prompt(ref, text)

    @abc.abstractmethod
    async def _set_system_prompt(self, ref: SessionRef, text: str | None) -> None: ...

    async def add_hint(self, ref: SessionRef, text: str) -> Hint:
        check_ref(ref)
        validate_text(text, "hint", allow_empty=False)
        return await self._add_hint(ref, text)

    @abc.abstractmethod
    async def _add_hint(self, ref: SessionRef, text: str) -> Hint: ...

    async def hints(self, ref: SessionRef) -> list[Hint]:
        check_ref(ref)
        return await self._hints(ref)

    @abc.abstractmethod
    async def _hints(self, ref: SessionRef) -> list[Hint]: ...

    async def remove_hint(self, ref: SessionRef, hint_id: int) -> bool:
        check_ref(ref)
        check_int(hint_id, "hint_id")
        return await self._remove_hint(ref, hint_id)

    @abc.abstractmethod
    async def _remove_hint(self, ref: SessionRef, hint_id: int) -> bool: ...

    async def summary(self, ref: SessionRef) -> Summary | None:
        check_ref(ref)
        return await self._summary(ref)

    @abc.abstractmethod
    async def _summary(self, ref: SessionRef) -> Summary | None: ...

    async def set_summary(self, ref: SessionRef, text: str, through_seq: int) -> Summary:
        """Store the running summary covering the log up to ``through_seq`` (tokens counted)."""
        check_ref(ref)
        validate_text(text, "summary", allow_empty=False)
        check_int(through_seq, "through_seq")
        return await self._set_summary(ref, text, through_seq)

    @abc.abstractmethod
    async def _set_summary(self, ref: SessionRef, text: str, through_seq: int) -> Summary: ...

    async def set_window_start(self, ref: SessionRef, seq: int) -> None:
        """Move the window start (compaction). It may only move forward and not past
        ``last_seq + 1``; an invalid value raises InvalidLimitError."""
        check_ref(ref)
        check_int(seq, "seq", minimum=1)
        await self._set_window_start(ref, seq)

    @abc.abstractmethod
    async def _set_window_start(self, ref: SessionRef, seq: int) -> None: ...

    async def clear(self, ref: SessionRef) -> int:
        """Delete the log, hints, summary and system prompt; counters return to zero and the
        next seq is 1 again. Returns the number of messages deleted."""
        check_ref(ref)
        return await self._clear(ref)

    @abc.abstractmethod
    async def _clear(self, ref: SessionRef) -> int: ...

    async def restore(
        self,
        ref: SessionRef,
        messages: Sequence[StoredMessage],
        *,
        hints: Sequence[Hint] = (),
        summary: Summary | None = None,
        system_prompt: str | None = None,
        window_start_seq: int = 1,
    ) -> None:
        """Write an exported log verbatim (seq, turn ids, tokens, timestamps) into an empty
        session: the import half of bundles. Raises AlreadyExistsError if the log is not empty."""
        check_ref(ref)
        log = checked_log(messages)
        last_seq = log[-1].seq if log else 0
        extras = checked_restore_extras(hints, summary, system_prompt, last_seq)
        check_int(window_start_seq, "window_start_seq", minimum=1, maximum=last_seq + 1)
        await self._restore(ref, log, extras, window_start_seq)

    @abc.abstractmethod
    async def _restore(
        self,
        ref: SessionRef,
        log: list[StoredMessage],
        extras: RestoreExtras,
        window_start_seq: int,
    ) -> None: ...


class KVStore(RecordsChanges, abc.ABC, changes=changes.KV):
    """Buckets of keys -> bytes or JSON, with a revision per write.

    Every method checks its arguments here, once for every backend; a backend implements the
    ``_`` method beside it, which receives them checked."""

    async def put(
        self,
        scope: KVScope,
        bucket: str,
        key: str,
        value: Any,
        *,
        expected_revision: int | None = None,
        ttl_seconds: float | None = None,
    ) -> int:
        """Write and return the new revision (1 for a new key, then +1 per write).

        ``value`` is bytes (stored as bytes) or any JSON value. ``expected_revision`` makes the
        write conditional: the current revision must equal it (0 means "must not exist"),
        else RevisionConflictError and nothing is written. An expired key counts as absent.
        """
        put = checked_kv_put(scope, bucket, key, value, expected_revision, ttl_seconds)
        return await self._put(scope, bucket, key, put, expected_revision)

    @abc.abstractmethod
    async def _put(
        self, scope: KVScope, bucket: str, key: str, put: KVPut, expected_revision: int | None
    ) -> int:
        """``put``: the value encoded in ``put``, with its TTL."""

    async def get(self, scope: KVScope, bucket: str, key: str) -> KVEntry | None:
        check_kv_key(scope, bucket, key)
        return await self._get(scope, bucket, key)

    @abc.abstractmethod
    async def _get(self, scope: KVScope, bucket: str, key: str) -> KVEntry | None: ...

    async def delete(
        self, scope: KVScope, bucket: str, key: str, *, expected_revision: int | None = None
    ) -> bool:
        check_kv_key(scope, bucket, key)
        if expected_revision is not None:
            check_int(expected_revision, "expected_revision")
        return await self._delete(scope, bucket, key, expected_revision)

    @abc.abstractmethod
    async def _delete(
        self, scope: KVScope, bucket: str, key: str, expected_revision: int | None
    ) -> bool: ...

    async def list_keys(
        self,
        scope: KVScope,
        bucket: str,
        prefix: str = "",
        *,
        limit: int = 100,
        after: str | None = None,
    ) -> KeyPage:
        """Live keys starting with ``prefix`` in ascending order, ``limit`` per page (1..1000),
        continuing after key ``after``. The prefix is matched literally (no wildcards)."""
        check_scope(scope)
        validate_identifier(bucket, "bucket")
        validate_prefix(prefix)
        check_page_limit(limit)
        if after is not None:
            validate_key(after)
        return await self._list_keys(scope, bucket, prefix, limit, after)

    @abc.abstractmethod
    async def _list_keys(
        self, scope: KVScope, bucket: str, prefix: str, limit: int, after: str | None
    ) -> KeyPage: ...

    async def buckets(self, scope: KVScope) -> builtins.list[str]:
        check_scope(scope)
        return await self._buckets(scope)

    @abc.abstractmethod
    async def _buckets(self, scope: KVScope) -> builtins.list[str]: ...

    async def count(self, scope: KVScope, bucket_prefix: str = "") -> int:
        """Live keys of the scope in buckets starting with ``bucket_prefix``."""
        check_scope(scope)
        validate_prefix(bucket_prefix)
        return await self._count(scope, bucket_prefix)

    @abc.abstractmethod
    async def _count(self, scope: KVScope, bucket_prefix: str) -> int: ...

    async def entries(self, scope: KVScope) -> builtins.list[KVEntry]:
        """Every live entry of the scope (export)."""
        check_scope(scope)
        return await self._entries(scope)

    @abc.abstractmethod
    async def _entries(self, scope: KVScope) -> builtins.list[KVEntry]: ...

    async def restore(self, scope: KVScope, entries: Sequence[KVEntry]) -> None:
        """Write exported entries verbatim, revisions and timestamps included. A key given
        twice keeps its last entry, like repeated puts."""
        check_scope(scope)
        await self._restore(scope, checked_kv_entries(entries))

    @abc.abstractmethod
    async def _restore(self, scope: KVScope, entries: builtins.list[RestoredKV]) -> None: ...

    async def clear(self, scope: KVScope, bucket_prefix: str = "") -> int:
        """Delete the scope's keys in buckets starting with ``bucket_prefix``; returns count."""
        check_scope(scope)
        validate_prefix(bucket_prefix)
        return await self._clear(scope, bucket_prefix)

    @abc.abstractmethod
    async def _clear(self, scope: KVScope, bucket_prefix: str) -> int: ...

    async def sweep_expired(self, now: datetime) -> int:
        """Delete keys whose TTL has passed, in every scope; returns how many."""
        return await self._sweep_expired(check_aware(now, "now"))

    @abc.abstractmethod
    async def _sweep_expired(self, now: datetime) -> int: ...


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


class ScopedStateStore(RecordsChanges, abc.ABC, changes=changes.STATE):
    """Scoped state: one JSON document per (namespace, task_id, agent_id), at most
    MAX_STATE_BYTES (16 MiB). Arguments are checked here; a backend implements the ``_``
    methods."""

    async def create(
        self, namespace: str, task_id: str, agent_id: str, state: dict[str, Any]
    ) -> ScopedState:
        """Create version 1; AlreadyExistsError if the scope has a document."""
        check_state_scope(namespace, task_id, agent_id)
        return await self._create(namespace, task_id, agent_id, encode_state(state))

    @abc.abstractmethod
    async def _create(
        self, namespace: str, task_id: str, agent_id: str, document: str
    ) -> ScopedState: ...

    async def get(self, namespace: str, task_id: str, agent_id: str) -> ScopedState | None:
        check_state_scope(namespace, task_id, agent_id)
        return await self._get(namespace, task_id, agent_id)

    @abc.abstractmethod
    async def _get(self, namespace: str, task_id: str, agent_id: str) -> ScopedState | None: ...

    async def update(
        self,
        namespace: str,
        task_id: str,
        agent_id: str,
        state: dict[str, Any],
        *,
        expected_version: int | None = None,
    ) -> ScopedState:
        """Replace the document (version + 1). NotFoundError if absent; VersionConflictError
        when ``expected_version`` is given and stale; StateTooLargeError over MAX_STATE_BYTES."""
        check_state_scope(namespace, task_id, agent_id)
        document = encode_state(state)
        if expected_version is not None:
            check_int(expected_version, "expected_version", minimum=1)
        return await self._update(namespace, task_id, agent_id, document, expected_version)

    @abc.abstractmethod
    async def _update(
        self,
        namespace: str,
        task_id: str,
        agent_id: str,
        document: str,
        expected_version: int | None,
    ) -> ScopedState: ...

    async def delete(self, namespace: str, task_id: str, agent_id: str) -> bool:
        check_state_scope(namespace, task_id, agent_id)
        return await self._delete(namespace, task_id, agent_id)

    @abc.abstractmethod
    async def _delete(self, namespace: str, task_id: str, agent_id: str) -> bool: ...

    async def list(
        self, namespace: str, *, task_id: str | None = None
    ) -> builtins.list[ScopedState]:
        validate_identifier(namespace, "namespace")
        if task_id is not None:
            validate_identifier(task_id, "task_id")
        return await self._list(namespace, task_id)

    @abc.abstractmethod
    async def _list(self, namespace: str, task_id: str | None) -> builtins.list[ScopedState]: ...

    async def restore(self, states: Sequence[ScopedState]) -> None:
        """Write exported documents verbatim; a scope given twice keeps its last document."""
        await self._restore(checked_states(states))

    @abc.abstractmethod
    async def _restore(self, states: builtins.list[RestoredState]) -> None: ...


class FlowStore(RecordsChanges, abc.ABC, changes=changes.FLOW):
    """Flow checkpoints with full history (time travel and fork). Arguments are checked
    here; a backend implements the ``_`` methods."""

    async def save(
        self, ref: SessionRef, flow_id: str, step: str, data: dict[str, Any]
    ) -> FlowCheckpoint:
        """Append a checkpoint; its version is the flow's previous version + 1 (first is 1).
        ``conversation_seq`` records the session's last seq at this moment."""
        document = checked_flow_save(ref, flow_id, step, data)
        return await self._save(ref, flow_id, step, document)

    @abc.abstractmethod
    async def _save(
        self, ref: SessionRef, flow_id: str, step: str, document: str
    ) -> FlowCheckpoint:
        """``save``, with the data as the JSON document to store."""

    async def latest(self, ref: SessionRef, flow_id: str) -> FlowCheckpoint | None:
        check_ref(ref)
        validate_identifier(flow_id, "flow_id")
        return await self._latest(ref, flow_id)

    @abc.abstractmethod
    async def _latest(self, ref: SessionRef, flow_id: str) -> FlowCheckpoint | None: ...

    async def load(self, ref: SessionRef, flow_id: str, version: int) -> FlowCheckpoint:
        """A given version; NotFoundError if it does not exist."""
        check_ref(ref)
        validate_identifier(flow_id, "flow_id")
        check_int(version, "version", minimum=1)
        return await self._load(ref, flow_id, version)

    @abc.abstractmethod
    async def _load(self, ref: SessionRef, flow_id: str, version: int) -> FlowCheckpoint: ...

    async def history(self, ref: SessionRef, flow_id: str) -> builtins.list[FlowCheckpoint]:
        """All versions, oldest first."""
        check_ref(ref)
        validate_identifier(flow_id, "flow_id")
        return await self._history(ref, flow_id)

    @abc.abstractmethod
    async def _history(self, ref: SessionRef, flow_id: str) -> builtins.list[FlowCheckpoint]: ...

    async def flows(self, ref: SessionRef) -> builtins.list[str]:
        check_ref(ref)
        return await self._flows(ref)

    @abc.abstractmethod
    async def _flows(self, ref: SessionRef) -> builtins.list[str]: ...

    async def count(self, ref: SessionRef) -> int:
        """Checkpoints stored for the session, all flows."""
        check_ref(ref)
        return await self._count(ref)

    @abc.abstractmethod
    async def _count(self, ref: SessionRef) -> int: ...

    async def restore(self, ref: SessionRef, checkpoints: Sequence[FlowCheckpoint]) -> None:
        """Write exported checkpoints verbatim; AlreadyExistsError if a version exists."""
        check_ref(ref)
        await self._restore(ref, checked_flow_checkpoints(checkpoints))

    @abc.abstractmethod
    async def _restore(
        self, ref: SessionRef, checkpoints: builtins.list[tuple[FlowCheckpoint, str]]
    ) -> None:
        """``restore``: each checkpoint with its data as the JSON document to store."""

    async def clear(self, ref: SessionRef) -> int:
        check_ref(ref)
        return await self._clear(ref)

    @abc.abstractmethod
    async def _clear(self, ref: SessionRef) -> int: ...


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
