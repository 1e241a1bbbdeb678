"""``StatecoreSession``: the OpenAI Agents SDK's ``Session`` on statecore's store.

Standalone, it replaces the SDK's own sessions (``SQLiteSession``, ``SQLAlchemySession``) on
memory, SQLite, PostgreSQL or MariaDB by changing only the line that constructs the session,
provided the session id is a statecore identifier (docs/openai_agents.md, "Moving from the
SDK's sessions", lists what else to change). Inside a statecore turn
(``statecore.integrations.openai_agents._turns``) a session bound to the turn reads the
committed log and keeps what the run adds in memory, so the turn's activity commits it together
with the turn record, once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from agents.memory.session_settings import SessionSettings, coerce_session_settings

from statecore.core._errors import InvalidInputError
from statecore.core._limits import MAX_PAGE_SIZE
from statecore.core._model_windows import context_budget
from statecore.core._models import DEFAULT_NAMESPACE, Message, SessionRef
from statecore.core._profile import SessionProfile
from statecore.core._tokens import TokenCounter
from statecore.integrations.openai_agents import _compaction as compaction
from statecore.integrations.openai_agents._closing import Closing, OpenedStore, close_stores
from statecore.integrations.openai_agents._items import items_to_messages, messages_to_items
from statecore.integrations.openai_agents._memory_stores import shared_memory_store
from statecore.integrations.openai_agents._session_ids import check_session_id
from statecore.operations._context_window import assemble_context
from statecore.store import MEMORY_URL, StateStore, StoreTransaction, open_store, run_transaction

#: The agent id a standalone session is stored under unless told otherwise.
DEFAULT_AGENT_ID = "openai-agents"


class StatecoreSession:
    """The SDK's ``Session`` protocol (``get_items``, ``add_items``, ``pop_item``,
    ``clear_session``, ``session_settings``; every method also takes the SDK's ``wrapper``).

    Args:
        session_id: the SDK's session id. It must be a statecore identifier (letters, digits
            and ``_ . - @``, at most 128 characters); anything else is refused with
            ``InvalidIdentifierError`` rather than rewritten, so one id never names two logs.
        database_url: ``memory://``, ``sqlite:///path``, ``postgresql://...`` or
            ``mysql://...``; the schema is migrated on first use. Or pass ``store``: an open
            ``StateStore`` the caller owns (and closes).
        agent_id, namespace: where the session lives in statecore (its ``SessionRef``).
        profile: with a profile, ``get_items`` returns the assembled context (system prompt,
            summary, hints and the newest items that fit ``profile.max_tokens``) instead of the
            raw log; without one it returns what the SDK's own sessions return.
        session_settings: the SDK's ``SessionSettings`` (its ``limit`` applies to
            ``get_items`` when no limit is passed).
    """

    def __init__(
        self,
        session_id: str,
        *,
        database_url: str | None = None,
        store: StateStore | None = None,
        agent_id: str = DEFAULT_AGENT_ID,
        namespace: str = DEFAULT_NAMESPACE,
        profile: SessionProfile | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        if (database_url is None) == (store is None):
            raise InvalidInputError("pass exactly one of database_url= or store=")
        if database_url is not None and not isinstance(database_url, str):
            raise InvalidInputError("database_url must be a string URL")
        check_session_id(session_id)
        self.session_id = session_id
        self.ref = SessionRef(namespace=namespace, agent_id=agent_id, session_id=session_id)
        self.profile = profile
        # The SDK's own sessions normalise their settings the same way (a dict is checked
        # field by field; None means the defaults).
        self.session_settings: SessionSettings | None = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(session_settings)
        )
        self._url = database_url
        self._given_store = store
        self._counter = token_counter or TokenCounter()
        # A SQL connection pool belongs to the event loop that opened it, and the SDK's
        # run_sync runs on a loop of its own: one store per loop (memory:// is shared).
        self._stores: dict[int, OpenedStore] = {}

    # --- the SDK's protocol ------------------------------------------------------------------

    async def get_items(self, limit: int | None = None, wrapper: Any = None) -> list[Any]:
        limit = self._limit(limit)
        store = await self._store()
        items = await run_transaction(store, lambda tx: self._read_items(tx, limit), read_only=True)
        return _newest(items, limit)

    async def add_items(self, items: list[Any], wrapper: Any = None) -> None:
        messages = items_to_messages(items)
        if not messages:
            return
        store = await self._store()
        # One call is one write: a fresh turn id numbers its items 0..n-1, so a transaction
        # re-run after a lost deadlock stores them once.
        turn_id = f"items-{uuid.uuid4().hex}"

        async def write(tx: StoreTransaction) -> None:
            await tx.sessions.ensure(self.ref)
            await tx.conversation.append(self.ref, turn_id, messages)

        await run_transaction(store, write)

    async def pop_item(self, wrapper: Any = None) -> Any | None:
        """Take back the newest item. The message is retracted, not deleted: readers no longer
        see it, the log keeps it for audit until the session is reset."""
        store = await self._store()

        async def retract(tx: StoreTransaction) -> Message | None:
            if await tx.sessions.get(self.ref) is None:
                return None
            return await tx.conversation.retract_last(self.ref)

        taken = await run_transaction(store, retract)
        if taken is None:
            return None
        return messages_to_items([taken])[0]

    async def clear_session(self, wrapper: Any = None) -> None:
        """The SDK's reset: deletes the session's log, summary and hints."""
        store = await self._store()

        async def clear(tx: StoreTransaction) -> None:
            if await tx.sessions.get(self.ref) is not None:
                await tx.conversation.clear(self.ref)

        await run_transaction(store, clear)

    # --- statecore's side --------------------------------------------------------------------

    def close(self) -> Closing:
        """Close the stores this session opened (never a store passed in, nor the process's
        shared ``memory://`` store). Works as the SDK's sessions' ``close()`` does, called
        without ``await``, and as ``await session.close()`` in async code: see
        ``statecore.integrations.openai_agents._closing``. A closed session opens its store
        again when it is used again."""
        opened, self._stores = list(self._stores.values()), {}
        return close_stores(opened)

    # --- the SDK's optional compaction hooks (statecore.integrations.openai_agents._compaction)

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[Any], bool] | None = None
    ) -> Any:
        return await compaction.read_snapshot(self, limit, prune_prefix)

    async def _atomic_replace_items(self, items: list[Any]) -> bool:
        return await compaction.replace_all(self, items)

    async def _read_items(self, tx: StoreTransaction, limit: int | None) -> list[Any]:
        info = await tx.sessions.get(self.ref)
        if info is None:
            return []
        if (
            self.profile is None
            and limit is not None
            and limit <= MAX_PAGE_SIZE
            and info.window_start_seq == 1
        ):
            # The newest ``limit`` items, one indexed read however long the log. (A compacted
            # log's window starts later; the raw view still shows everything before it.)
            newest = await tx.conversation.tail(self.ref, max_messages=max(limit, 1))
            return messages_to_items(newest)
        if self.profile is not None:
            context = await assemble_context(
                tx, self.ref, [], max_tokens=self._budget, counter=self._counter
            )
            return messages_to_items(context.messages)
        return messages_to_items(await tx.conversation.messages(self.ref))

    @property
    def _budget(self) -> int:
        # A profile without max_tokens gets statecore's default budget: the SDK's model is not
        # known to the session, so its context window is not either.
        assert self.profile is not None
        return context_budget(self.profile.max_tokens, None)

    def _limit(self, limit: int | None) -> int | None:
        if limit is None and self.session_settings is not None:
            limit = getattr(self.session_settings, "limit", None)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidInputError(f"limit must be an integer or None, not {limit!r}")
        return limit

    async def _store(self) -> StateStore:
        if self._given_store is not None:
            return self._given_store
        assert self._url is not None
        if self._url.strip().lower() == MEMORY_URL:
            return shared_memory_store(self._counter)
        loop = asyncio.get_running_loop()
        # Keyed by the loop object's id while the entry holds the loop, so no later loop can
        # reuse the id of one this session still has a store for.
        opened = self._stores.get(id(loop))
        if opened is None:
            store = await open_store(self._url, token_counter=self._counter, migrate=True)
            opened = OpenedStore(store, loop)
            self._stores[id(loop)] = opened
        return opened.store


def _newest(items: list[Any], limit: int | None) -> list[Any]:
    """The newest ``limit`` items in order (all for None; none for 0 or less, as the SDK's
    own sessions do)."""
    if limit is None:
        return items
    return items[-limit:] if limit > 0 else []


class TurnBoundSession(StatecoreSession):
    """The session a statecore turn hands to ``Runner.run``: reads see the committed log (as
    the session's profile assembles it) followed by what this run has added; writes stay in
    memory until the turn's activity commits them with the turn record.

    ``pop_item`` can take back only what this run added (the committed log is changed by
    turns and operator signals, never from inside another turn), and ``clear_session`` is
    refused: a reset is the operator's ``reset`` signal."""

    def __init__(
        self,
        store: StateStore,
        ref: SessionRef,
        *,
        profile: SessionProfile,
        new_messages: list[Message],
        token_counter: TokenCounter,
    ) -> None:
        super().__init__(
            ref.session_id,
            store=store,
            agent_id=ref.agent_id,
            namespace=ref.namespace,
            profile=profile,
            token_counter=token_counter,
        )
        self._new_messages = new_messages
        self.added: list[Message] = []
        #: Tokens of the committed context the run started from (statecore's count).
        self.context_tokens = 0

    async def get_items(self, limit: int | None = None, wrapper: Any = None) -> list[Any]:
        limit = self._limit(limit)
        committed = await run_transaction(
            self._given_store_or_fail(), self._committed, read_only=True
        )
        return _newest([*committed, *messages_to_items(self.added)], limit)

    async def add_items(self, items: list[Any], wrapper: Any = None) -> None:
        self.added.extend(items_to_messages(items))

    async def pop_item(self, wrapper: Any = None) -> Any | None:
        if not self.added:
            raise InvalidInputError(
                "inside a statecore turn, pop_item can take back only the items this run "
                "added; the committed log is not changed from inside a turn"
            )
        return messages_to_items([self.added.pop()])[0]

    async def clear_session(self, wrapper: Any = None) -> None:
        raise InvalidInputError(
            "a statecore turn cannot clear its session; send the session the reset signal "
            "(statecore reset, or AgentSessionClient.reset)"
        )

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[Any], bool] | None = None
    ) -> Any:
        return None  # the committed log is not changed from inside a turn

    async def _atomic_replace_items(self, items: list[Any]) -> bool:
        raise InvalidInputError(
            "a statecore turn cannot replace its session's items; compact it with the "
            "session's compact signal (statecore compact, or AgentSessionClient.compact)"
        )

    def _given_store_or_fail(self) -> StateStore:
        assert self._given_store is not None
        return self._given_store

    async def _committed(self, tx: StoreTransaction) -> list[Any]:
        if await tx.sessions.get(self.ref) is None:
            return []
        assert self.profile is not None
        # Assembled for the turn's new messages, so the window leaves room for them; they
        # are the run's own input and are dropped from what the session returns.
        context = await assemble_context(
            tx,
            self.ref,
            self._new_messages,
            max_tokens=self._budget,
            counter=self._counter,
        )
        self.context_tokens = context.tokens
        history = context.messages[: len(context.messages) - len(self._new_messages)]
        return messages_to_items(history)
