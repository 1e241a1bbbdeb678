"""``StatecoreConversationStore``: Pydantic AI's ``ConversationStore`` on statecore's store.

A conversation is a statecore session (``SessionRef(namespace, agent_id, conversation_id)``)
whose log holds the conversation's entries, one statecore message per Pydantic AI message
(``codec``), appended in the order they were saved; branches and forks point into logs by entry
id, so an entry is stored once however many histories share it. The record (usage, head,
branches, revision) lives in the namespace's KV (``records``). A save appends its entries and
replaces the record in one transaction, and the record is replaced only at the KV revision that
transaction read, so a stale revision raises ``ConversationConflict`` however many processes
write: the database decides.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)

from statecore.core._errors import InvalidInputError, RevisionConflictError
from statecore.core._models import DEFAULT_NAMESPACE, KVScope, SessionRef, validate_identifier
from statecore.core._tokens import TokenCounter
from statecore.integrations.pydantic_ai import _records as kv
from statecore.integrations.pydantic_ai._codec import (
    entry_id_of,
    entry_messages,
    parse_message,
    stored_entry,
)
from statecore.store import MEMORY_URL, StateStore, StoreTransaction, open_store, run_transaction

#: The agent id conversations are stored under unless told otherwise.
DEFAULT_AGENT_ID = "pydantic-ai"
#: A conversation's session never expires on its own: Pydantic AI's stores keep a
#: conversation until it is deleted (the longest idle TTL statecore accepts).
KEEP_SECONDS = 2**31 - 1

T = TypeVar("T")
_Log = dict[str, tuple[str | None, object]]


class StatecoreConversationStore(ConversationStore):
    """Pydantic AI's ``ConversationStore`` on memory, SQLite, PostgreSQL or MariaDB.

    Args:
        database_url: ``memory://``, ``sqlite:///path``, ``postgresql://...`` or
            ``mysql://...``; the schema is migrated on first use. Or pass ``store``: an open
            ``StateStore`` the caller owns (and closes).
        namespace, agent_id: where the conversations live in statecore (each one is the
            session ``namespace/agent_id/<conversation_id>``).
        ttl_seconds: the idle time after which statecore's retention removes a conversation
            (default: never).

    Conversation ids must be statecore identifiers (letters, digits and ``_ . - @``, at most
    128 characters, as Pydantic AI's own uuid7 ids are); anything else is refused with
    ``InvalidIdentifierError`` rather than rewritten.
    """

    def __init__(
        self,
        *,
        database_url: str | None = None,
        store: StateStore | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        agent_id: str = DEFAULT_AGENT_ID,
        ttl_seconds: int = KEEP_SECONDS,
        token_counter: TokenCounter | None = None,
    ) -> None:
        if (database_url is None) == (store is None):
            raise InvalidInputError("pass exactly one of database_url= or store=")
        if database_url is not None and not isinstance(database_url, str):
            raise InvalidInputError("database_url must be a string URL")
        self.namespace = validate_identifier(namespace, "namespace")
        self.agent_id = validate_identifier(agent_id, "agent_id")
        self.scope = KVScope(namespace=namespace)
        self.ttl_seconds = ttl_seconds
        self._url = database_url
        self._given_store = store
        self._counter = token_counter or TokenCounter()
        # A SQL connection pool belongs to the event loop that opened it: one store per loop.
        self._stores: dict[int, StateStore] = {}

    def ref(self, conversation_id: str) -> SessionRef:
        """The statecore session that holds a conversation's log."""
        validate_identifier(conversation_id, "conversation_id")
        return SessionRef(
            namespace=self.namespace, agent_id=self.agent_id, session_id=conversation_id
        )

    # --- Pydantic AI's storage primitives ----------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        self.ref(conversation_id)
        stored = await self._in_read(lambda tx: kv.read_record(tx, self.scope, conversation_id))
        return stored[0] if stored is not None else None

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        records = await self._in_read(lambda tx: kv.all_records(tx, self.scope))
        chosen = [r for r in records if scope is None or r.scope == scope]
        chosen.sort(key=lambda r: r.updated_at, reverse=True)
        return chosen[:limit]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        conversation_id = record.conversation_id
        ref = self.ref(conversation_id)
        entries = list(new_entries)
        # Encoded (and so checked) before the transaction: a bad message changes nothing.
        messages = [m for e in entries for m in entry_messages(e.id, e.parent_id, e.message)]
        value = kv.record_json(record)
        turn_id = f"pai-{uuid.uuid4().hex}"  # fixed here: a re-run transaction stores it once

        async def write(tx: StoreTransaction) -> None:
            stored = await kv.read_record(tx, self.scope, conversation_id)
            if (stored[0].revision if stored else None) != expected_revision:
                raise ConversationConflict(conversation_id)
            # The entries this history reaches outside what the write adds: each must be
            # stored (a concurrent delete may have released what a fork points into).
            new_ids = {e.id for e in entries}
            reached = [record.head_id, entries[0].parent_id if entries else None]
            base: str | None = None
            for entry_id in dict.fromkeys(r for r in reached if r is not None and r not in new_ids):
                owner = await kv.owner_of(tx, self.scope, entry_id)
                if owner is None:
                    raise ConversationConflict(conversation_id)
                if owner != conversation_id and base is None:
                    base = owner
            if messages:
                await tx.sessions.ensure(ref, ttl_seconds=self.ttl_seconds)
                await tx.conversation.append(ref, turn_id, messages)
                for entry in entries:
                    await tx.kv.put(self.scope, kv.ENTRIES, entry.id, conversation_id)
            if base is not None:
                await kv.link_base(tx, self.scope, conversation_id, base)
            await tx.kv.put(
                self.scope,
                kv.RECORDS,
                conversation_id,
                value,
                expected_revision=stored[1] if stored else 0,
            )

        await self._in_write(write, conversation_id)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        self.ref(conversation_id)

        async def delete(tx: StoreTransaction) -> None:
            stored = await kv.read_record(tx, self.scope, conversation_id)
            if stored is None or stored[0].revision != expected_revision:
                raise ConversationConflict(conversation_id)
            await tx.kv.delete(self.scope, kv.RECORDS, conversation_id, expected_revision=stored[1])
            await self._release(tx, conversation_id)

        await self._in_write(delete, conversation_id)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        history = await self.read_history(entry_id, limit=1)
        return history[0]

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The whole history in one read transaction, one log at a time (not one query per
        entry): the entries up to ``head_id``, or only its last ``limit``."""

        async def walk(tx: StoreTransaction) -> list[ConversationEntry]:
            logs: _Log = {}
            seen: set[str] = set()
            out: list[ConversationEntry] = []
            entry_id = head_id
            while entry_id is not None and (limit is None or len(out) < limit):
                if entry_id not in logs:
                    owner = await kv.owner_of(tx, self.scope, entry_id)
                    if owner is None or owner in seen:
                        raise KeyError(entry_id)
                    seen.add(owner)
                    logs.update(await self._log(tx, owner))
                    if entry_id not in logs:
                        raise KeyError(entry_id)
                parent_id, message = logs[entry_id]
                out.append(
                    ConversationEntry(
                        id=entry_id,
                        parent_id=parent_id,
                        message=parse_message(message, f"entry {entry_id}"),
                    )
                )
                entry_id = parent_id
            out.reverse()
            return out

        return await self._in_read(walk)

    # --- statecore's side --------------------------------------------------------------------

    async def close(self) -> None:
        """Close the stores this object opened (never a store passed in)."""
        stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            await store.close()

    async def _log(self, tx: StoreTransaction, conversation_id: str) -> _Log:
        ref = self.ref(conversation_id)
        if await tx.sessions.get(ref) is None:
            return {}
        out: _Log = {}
        for message in await tx.conversation.messages(ref):
            stored = stored_entry(message)
            if stored is not None:
                out[str(stored["id"])] = (stored.get("parent_id"), stored["message"])
        return out

    async def _release(self, tx: StoreTransaction, conversation_id: str) -> None:
        """Drop a conversation's log (and its entries' index rows) once nothing needs it: its
        record is gone and no other conversation's history reaches into it; then the same for
        the log it continued, if any."""
        current: str | None = conversation_id
        while current is not None:
            if await kv.read_record(tx, self.scope, current) is not None:
                return
            if await kv.has_forks(tx, self.scope, current):
                return
            ref = self.ref(current)
            if await tx.sessions.get(ref) is not None:
                for message in await tx.conversation.messages(ref, include_retracted=True):
                    entry_id = entry_id_of(message)
                    if entry_id is not None and stored_entry(message) is not None:
                        await tx.kv.delete(self.scope, kv.ENTRIES, entry_id)
                await tx.sessions.delete(ref)
            base = await kv.base_of(tx, self.scope, current)
            if base is not None:
                await tx.kv.delete(self.scope, kv.BASES, current)
                await tx.kv.delete(self.scope, kv.FORKS, f"{base}:{current}")
            current = base

    async def _in_read(self, work: Callable[[StoreTransaction], Awaitable[T]]) -> T:
        return await run_transaction(await self._store(), work, read_only=True)

    async def _in_write(
        self, work: Callable[[StoreTransaction], Awaitable[None]], conversation_id: str
    ) -> None:
        try:
            await run_transaction(await self._store(), work)
        except RevisionConflictError as exc:
            # Another writer replaced the record between this transaction's read and its write.
            raise ConversationConflict(conversation_id) from exc

    async def _store(self) -> StateStore:
        if self._given_store is not None:
            return self._given_store
        assert self._url is not None
        key = 0 if self._url.strip().lower() == MEMORY_URL else id(asyncio.get_running_loop())
        store = self._stores.get(key)
        if store is None:
            store = await open_store(self._url, token_counter=self._counter, migrate=True)
            self._stores[key] = store
        return store
