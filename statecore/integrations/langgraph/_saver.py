"""StatecoreSaver: LangGraph's ``BaseCheckpointSaver`` on statecore's SQL backends.

Layout after LangGraph's own savers (checkpoints, blobs, writes; see revision
0004_langgraph_checkpoints): a checkpoint row holds everything but the channel values; a
channel's value is stored once per version, so a step writes only the channels it changed.
With ``DeltaChannel`` a message list changes by its new messages only, and a turn writes a
constant number of bytes however long the conversation is.

Values go through the saver's ``serde`` (LangGraph's ``JsonPlusSerializer`` unless the user
passes another one; it unpickles nothing unless constructed to). A stored value that no
longer deserialises is reported as ``CorruptCheckpointError``, a value over
``max_value_bytes`` as ``CheckpointTooLargeError`` before anything is written.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from statecore.core._errors import (
    InvalidInputError,
)
from statecore.integrations.langgraph import _rows as rows
from statecore.integrations.langgraph import _segments as segments
from statecore.integrations.langgraph._codec import EMPTY, ValueCodec
from statecore.integrations.langgraph._history import delta_history
from statecore.integrations.langgraph._keys import (
    name_bytes,
    name_key,
    ordered_id,
    thread_name,
)
from statecore.integrations.langgraph._loop_bridge import (
    DEFAULT_SYNC_TIMEOUT_SECONDS,
    call_on_loop,
)
from statecore.integrations.langgraph._maintenance import collect_blobs, keep_latest
from statecore.integrations.langgraph._opener import SaverOpener
from statecore.integrations.langgraph._setup_call import SetupCall, run_setup
from statecore.store._retry import DEFAULT_ATTEMPTS, retry_pause
from statecore.store.sql._engine import READ_ONLY_OPTION, dialect_name
from statecore.store.sql._transient import is_transient_conflict

T = TypeVar("T")

#: The largest serialised value (a checkpoint, a channel value, a write): MariaDB's
#: MEDIUMBLOB holds 16 MiB - 1 byte, and every dialect gets the same limit.
MAX_VALUE_BYTES = 16 * 1024 * 1024 - 1
#: Checkpoints read per query when listing one namespace.
PAGE_SIZE = 100
PRUNE_STRATEGIES = ("keep_latest", "delete")
#: A channel absent from a checkpoint's values (None is a value).
_ABSENT = object()


class StatecoreSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer on statecore's SQLite, PostgreSQL or MariaDB database.

    Open it with ``async with StatecoreSaver.from_conn_string(url) as saver`` (or ``with``
    for synchronous graphs), or on an open statecore store with
    ``StatecoreSaver.from_store(store)``. Run ``await saver.asetup()`` (``saver.setup()``)
    once to create its tables, as with LangGraph's own savers.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        serde: SerializerProtocol | None = None,
        max_value_bytes: int = MAX_VALUE_BYTES,
        sync_timeout: float = DEFAULT_SYNC_TIMEOUT_SECONDS,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """``engine`` is a statecore engine (``create_store_engine``); the saver does not
        dispose it. ``loop`` is the event loop its connections belong to (the running one
        by default); sync methods run their work there."""
        super().__init__(serde=serde)
        if isinstance(max_value_bytes, bool) or not isinstance(max_value_bytes, int):
            raise InvalidInputError("max_value_bytes must be an integer")
        if not 1 <= max_value_bytes <= MAX_VALUE_BYTES:
            raise InvalidInputError(f"max_value_bytes must be 1..{MAX_VALUE_BYTES}")
        self.engine = engine
        self.dialect = dialect_name(engine.url)
        self.max_value_bytes = max_value_bytes
        self.sync_timeout = sync_timeout
        self.loop = loop if loop is not None else asyncio.get_running_loop()

    # --- opening --------------------------------------------------------------------------

    @classmethod
    def from_conn_string(cls, database_url: str, **kwargs: Any) -> SaverOpener[Self]:
        """A context manager owning an engine for ``database_url`` (``sqlite:///path``,
        ``postgresql://...``, ``mysql://...``): ``async with`` on an event loop, plain
        ``with`` in synchronous code (the saver then runs on a private loop thread)."""
        return SaverOpener(cls, database_url, kwargs)

    @classmethod
    def from_store(cls, store: Any, **kwargs: Any) -> StatecoreSaver:
        """A saver sharing an open ``SqlStateStore``'s engine (the store keeps owning it)."""
        engine = getattr(store, "engine", None)
        if not isinstance(engine, AsyncEngine):
            raise InvalidInputError(
                "StatecoreSaver needs a SQL statecore store (open_store with a database URL); "
                "the in-memory store has no tables to keep checkpoints in"
            )
        return cls(engine, **kwargs)

    async def asetup(self) -> None:
        """Bring the database to statecore's schema (its tables and this saver's)."""
        from statecore.store.sql._revision import upgrade_engine

        await upgrade_engine(self.engine)

    def setup(self) -> SetupCall:
        """``saver.setup()`` in sync code and ``await saver.setup()`` in async code, as
        LangGraph's sync and async savers are set up (``statecore.integrations.langgraph.
        setup_call``); ``await saver.asetup()`` works too."""
        return run_setup(self.loop, self.asetup, timeout=self.sync_timeout)

    @property
    def codec(self) -> ValueCodec:
        # Built on use: with_allowlist() clones the saver with another serde.
        return ValueCodec(self.serde, self.max_value_bytes)

    # --- transactions -----------------------------------------------------------------------

    async def _run(
        self, work: Callable[[AsyncConnection], Awaitable[T]], *, read_only: bool = False
    ) -> T:
        """``work`` in one transaction, run again when it lost to a concurrent one."""
        attempt = 1
        while True:
            try:
                async with self.engine.connect() as conn:
                    if read_only:
                        conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
                    async with conn.begin():
                        return await work(conn)
            except Exception as error:
                if attempt >= DEFAULT_ATTEMPTS or not is_transient_conflict(error, self.dialect):
                    raise
                await asyncio.sleep(retry_pause(attempt))
                attempt += 1

    def _sync(self, make: Callable[[], Awaitable[T]], what: str) -> T:
        async def run() -> T:
            return await make()

        return call_on_loop(self.loop, run, timeout=self.sync_timeout, what=what)

    # --- writing ----------------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; only the channels in ``new_versions`` get a new blob."""
        configurable = config["configurable"]
        thread_id = thread_name(configurable.get("thread_id"))
        checkpoint_ns = configurable.get("checkpoint_ns", "") or ""
        scope = _scope(thread_id, checkpoint_ns)
        checkpoint_id = ordered_id(checkpoint["id"], "checkpoint id")
        parent_id = configurable.get("checkpoint_id")
        body = dict(checkpoint)
        values = cast(dict[str, Any], body.pop("channel_values", None) or {})
        blobs: list[dict[str, Any]] = []
        list_snapshots: list[tuple[dict[str, Any], segments.ListSnapshot]] = []
        for channel, version in new_versions.items():
            value = values.get(channel, _ABSENT)
            record = {
                "thread_key": scope.thread_key,
                "ns_key": scope.ns_key,
                "channel_key": name_key(channel, "channel name"),
                "version": ordered_id(version, f"version of channel {channel!r}"),
                "value_type": EMPTY,
                "value": b"",
            }
            if isinstance(value, _DeltaSnapshot) and isinstance(value.value, list):
                # Stored as a segment once the previous snapshot is known (in the transaction).
                list_snapshots.append((record, segments.plan(self.serde, value.value)))
            elif value is not _ABSENT:
                record["value_type"], record["value"] = self.codec.dump(
                    value, f"channel {channel!r}"
                )
            blobs.append(record)
        meta = get_serializable_checkpoint_metadata(config, metadata)
        run_id = meta.get("run_id")
        checkpoint_kind, checkpoint_data = self.codec.dump(body, "the checkpoint")
        meta_kind, meta_data = self.codec.dump(meta, "the checkpoint metadata")
        row = {
            "thread_key": scope.thread_key,
            "ns_key": scope.ns_key,
            "checkpoint_id": checkpoint_id,
            "thread_id": name_bytes(thread_id, "thread_id"),
            "checkpoint_ns": name_bytes(checkpoint_ns, "checkpoint_ns"),
            "parent_checkpoint_id": (
                ordered_id(parent_id, "parent checkpoint id") if parent_id else None
            ),
            "run_key": None if run_id is None else name_key(str(run_id), "run_id"),
            "checkpoint_type": checkpoint_kind,
            "checkpoint": checkpoint_data,
            "meta_type": meta_kind,
            "meta": meta_data,
        }

        async def work(conn: AsyncConnection) -> None:
            for record, snapshot in list_snapshots:
                await self.codec.fill_segment(conn, scope, record, snapshot)
            await rows.put_checkpoint(conn, self.dialect, row, blobs)

        await self._run(work)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against the checkpoint in ``config``."""
        configurable = config["configurable"]
        thread_id = thread_name(configurable.get("thread_id"))
        scope = _scope(thread_id, configurable.get("checkpoint_ns", "") or "")
        checkpoint_id = ordered_id(configurable.get("checkpoint_id"), "checkpoint id")
        task_key = name_key(task_id, "task_id")
        first_wins: list[dict[str, Any]] = []
        last_wins: list[dict[str, Any]] = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            kind, data = self.codec.dump(value, f"write to channel {channel!r}")
            record = {
                "thread_key": scope.thread_key,
                "ns_key": scope.ns_key,
                "checkpoint_id": checkpoint_id,
                "task_key": task_key,
                "idx": idx,
                "task_id": name_bytes(task_id, "task_id"),
                "task_path": name_bytes(task_path or "", "task_path"),
                "channel": name_bytes(channel, "channel name"),
                "value_type": kind,
                "value": data,
            }
            (first_wins if idx >= 0 else last_wins).append(record)

        async def work(conn: AsyncConnection) -> None:
            await rows.put_writes(conn, self.dialect, first_wins, last_wins)

        await self._run(work)

    # --- reading ----------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (the newest of its namespace without a
        ``checkpoint_id``), with its channel values and pending writes."""
        configurable = config["configurable"]
        thread_id = thread_name(configurable.get("thread_id"))
        checkpoint_ns = configurable.get("checkpoint_ns", "") or ""
        scope = _scope(thread_id, checkpoint_ns)
        wanted = get_checkpoint_id(config)
        if wanted is not None:
            wanted = ordered_id(wanted, "checkpoint id")

        async def work(conn: AsyncConnection) -> CheckpointTuple | None:
            found = await rows.checkpoint_with_writes(conn, scope, wanted)
            if not found:
                return None
            head = found[0]
            writes = [
                (r.w_task_id, r.w_task_path, r.w_idx, r.w_channel, r.w_value_type, r.w_value)
                for r in found
                if r.w_task_id is not None
            ]
            return (await self._tuples(conn, [head], {head.checkpoint_id: writes}))[0]

        return await self._run(work, read_only=True)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first: of one thread (and namespace, when the config names
        one), or of every thread with ``config=None``; ``filter`` matches metadata keys."""
        thread_key = ns_key = checkpoint_id = None
        if config is not None:
            configurable = config["configurable"]
            thread_key = name_key(thread_name(configurable.get("thread_id")), "thread_id")
            if configurable.get("checkpoint_ns") is not None:
                ns_key = name_key(configurable["checkpoint_ns"], "checkpoint_ns")
            if (wanted := get_checkpoint_id(config)) is not None:
                checkpoint_id = ordered_id(wanted, "checkpoint id")
        before_id = get_checkpoint_id(before) if before else None
        # Within one namespace checkpoint ids are unique, so pages follow each other by id;
        # across namespaces or threads ids repeat, and the listing is read in one query.
        paged = thread_key is not None and ns_key is not None and checkpoint_id is None
        remaining = limit
        while remaining is None or remaining > 0:
            if paged:
                page = PAGE_SIZE if filter or remaining is None else min(PAGE_SIZE, remaining)
            else:
                page = remaining if remaining is not None and not filter else 2**62

            async def work(
                conn: AsyncConnection,
                page: int = page,
                before_id: str | None = before_id,
                remaining: int | None = remaining,
            ) -> tuple[list[CheckpointTuple], str | None, int]:
                found = await rows.list_checkpoints(
                    conn,
                    thread_key=thread_key,
                    ns_key=ns_key,
                    checkpoint_id=checkpoint_id,
                    before_id=before_id,
                    page=page,
                )
                matching = [r for r in found if self._matches(r, filter)]
                if remaining is not None:
                    matching = matching[:remaining]
                tuples = await self._tuples(conn, matching, None) if matching else []
                return tuples, (found[-1].checkpoint_id if found else None), len(found)

            tuples, last_id, read = await self._run(work, read_only=True)
            for item in tuples:
                yield item
            if remaining is not None:
                remaining -= len(tuples)
            if not paged or read < page or last_id is None:
                return
            before_id = last_id

    def _matches(self, row: rows.DbRow, filter: dict[str, Any] | None) -> bool:
        if not filter:
            return True
        meta = self.codec.load(row.meta_type, row.meta, "checkpoint metadata")
        return all(meta.get(key) == value for key, value in filter.items())

    async def _tuples(
        self,
        conn: AsyncConnection,
        heads: Sequence[rows.DbRow],
        writes_by_id: Mapping[str, list[tuple[Any, ...]]] | None,
    ) -> list[CheckpointTuple]:
        """CheckpointTuples for checkpoint rows: their blobs read in one query per
        namespace, their writes given or read likewise."""
        bodies: list[tuple[rows.DbRow, dict[str, Any]]] = []
        by_scope: dict[rows.Scope, list[tuple[rows.DbRow, dict[str, Any]]]] = {}
        for head in heads:
            body = self.codec.load(head.checkpoint_type, head.checkpoint, "checkpoint")
            bodies.append((head, body))
            by_scope.setdefault(rows.Scope(head.thread_key, head.ns_key), []).append((head, body))
        blobs: dict[tuple[rows.Scope, str, str], Any] = {}
        writes: dict[tuple[rows.Scope, str], list[tuple[Any, ...]]] = {}
        for scope, members in by_scope.items():
            wanted = [
                (name_key(ch, "channel name"), str(version))
                for _, body in members
                for ch, version in body.get("channel_versions", {}).items()
            ]
            if wanted:
                stored = await rows.blobs_of(conn, scope, wanted)
                for (ch_key, version), value in (
                    await self.codec.values(conn, scope, stored)
                ).items():
                    blobs[(scope, ch_key, version)] = value
            if writes_by_id is None:
                ids = [head.checkpoint_id for head, _ in members]
                for r in await rows.writes_of(conn, scope, ids):
                    writes.setdefault((scope, r.checkpoint_id), []).append(
                        (r.task_id, r.task_path, r.idx, r.channel, r.value_type, r.value)
                    )
            else:
                for head, _ in members:
                    writes[(scope, head.checkpoint_id)] = list(
                        writes_by_id.get(head.checkpoint_id, [])
                    )
        result = []
        for head, body in bodies:
            scope = rows.Scope(head.thread_key, head.ns_key)
            values: dict[str, Any] = {}
            for ch, version in body.get("channel_versions", {}).items():
                key = (scope, name_key(ch, "channel name"), str(version))
                if key in blobs:
                    values[ch] = blobs[key]
            thread_id = head.thread_id.decode("utf-8")
            checkpoint_ns = head.checkpoint_ns.decode("utf-8")
            result.append(
                CheckpointTuple(
                    config=_config(thread_id, checkpoint_ns, head.checkpoint_id),
                    checkpoint=cast(Checkpoint, {**body, "channel_values": values}),
                    metadata=cast(
                        CheckpointMetadata,
                        self.codec.load(head.meta_type, head.meta, "checkpoint metadata"),
                    ),
                    parent_config=(
                        _config(thread_id, checkpoint_ns, head.parent_checkpoint_id)
                        if head.parent_checkpoint_id
                        else None
                    ),
                    pending_writes=self.codec.pending(writes.get((scope, head.checkpoint_id), [])),
                )
            )
        return result

    # --- DeltaChannel history ---------------------------------------------------------------

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Walk the parent chain of the checkpoint in ``config`` once for all ``channels``:
        per channel, the writes of each ancestor (oldest first) back to the nearest one that
        stores a value (the seed). Reads one page of checkpoints, one blob lookup per page
        and the writes of the walked ancestors, never the whole thread."""
        if not channels:
            return {}
        configurable = config["configurable"]
        thread_id = thread_name(configurable.get("thread_id"))
        scope = _scope(thread_id, configurable.get("checkpoint_ns", "") or "")
        target = get_checkpoint_id(config)

        async def work(conn: AsyncConnection) -> Mapping[str, DeltaChannelHistory]:
            return await delta_history(conn, self.codec, scope, target, list(channels))

        return await self._run(work, read_only=True)

    # --- deleting and copying ---------------------------------------------------------------

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, blob and write of a thread, in every namespace."""
        key = name_key(thread_name(thread_id), "thread_id")

        async def work(conn: AsyncConnection) -> None:
            await rows.delete_threads(conn, [key])

        await self._run(work)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata names one of ``run_ids``;
        blobs no remaining checkpoint uses go with them."""
        if isinstance(run_ids, str):
            raise InvalidInputError("run_ids must be a sequence of run ids, not one string")
        keys = [name_key(str(r), "run_id") for r in run_ids]
        if not keys:
            return

        async def work(conn: AsyncConnection) -> None:
            doomed: dict[rows.Scope, list[str]] = {}
            for scope, checkpoint_id in await rows.checkpoints_of_runs(conn, keys):
                doomed.setdefault(scope, []).append(checkpoint_id)
            for scope, ids in doomed.items():
                await rows.delete_checkpoints(conn, scope, ids)
                await rows.orphan_children(conn, scope, ids)
                await collect_blobs(conn, self.codec, scope)

        await self._run(work)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread whole (every namespace, every ancestor with its writes, every blob,
        so DeltaChannel history stays complete) under another thread id, which must have no
        checkpoints yet."""
        source_key = name_key(thread_name(source_thread_id), "source thread_id")
        target = thread_name(target_thread_id)
        target_key = name_key(target, "target thread_id")
        if source_key == target_key:
            raise InvalidInputError("copy_thread: source and target thread are the same")

        async def work(conn: AsyncConnection) -> None:
            if await rows.thread_exists(conn, target_key):
                raise InvalidInputError(
                    f"copy_thread: thread {target[:80]!r} already has checkpoints; delete it "
                    "first or copy to a new thread id. Nothing was copied"
                )
            await rows.copy_thread(conn, source_key, target_key, name_bytes(target, "thread_id"))

        await self._run(work)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"delete"`` removes the threads; ``"keep_latest"`` keeps each namespace's newest
        checkpoint plus, when the thread uses DeltaChannel, every ancestor back to the
        nearest stored value of each delta channel (so the kept state still rebuilds)."""
        if isinstance(thread_ids, str):
            raise InvalidInputError("thread_ids must be a sequence of thread ids, not one string")
        if strategy not in PRUNE_STRATEGIES:
            raise InvalidInputError(
                f"unknown prune strategy {strategy!r}; use one of {', '.join(PRUNE_STRATEGIES)}"
            )
        keys = [name_key(thread_name(t), "thread_id") for t in thread_ids]
        if not keys:
            return

        async def work(conn: AsyncConnection) -> None:
            if strategy == "delete":
                await rows.delete_threads(conn, keys)
                return
            for scope in await rows.scopes_of_threads(conn, keys):
                await keep_latest(conn, self.codec, scope)

        await self._run(work)

    # --- the synchronous interface ----------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._sync(lambda: self.aget_tuple(config), "get_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        yield from self._sync(collect, "list")

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._sync(lambda: self.aput(config, checkpoint, metadata, new_versions), "put")

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync(lambda: self.aput_writes(config, writes, task_id, task_path), "put_writes")

    def delete_thread(self, thread_id: str) -> None:
        self._sync(lambda: self.adelete_thread(thread_id), "delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._sync(lambda: self.adelete_for_runs(run_ids), "delete_for_runs")

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._sync(lambda: self.acopy_thread(source_thread_id, target_thread_id), "copy_thread")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._sync(lambda: self.aprune(thread_ids, strategy=strategy), "prune")

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._sync(
            lambda: self.aget_delta_channel_history(config=config, channels=channels),
            "get_delta_channel_history",
        )

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Zero-padded versions, so they compare as strings in the order LangGraph needs."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        # The random part keeps two forks of one checkpoint from giving different values
        # the same version (a blob is written once per version), as LangGraph's savers do.
        return f"{number + 1:032}.{random.random():016}"


def _scope(thread_id: str, checkpoint_ns: str) -> rows.Scope:
    return rows.Scope(name_key(thread_id, "thread_id"), name_key(checkpoint_ns, "checkpoint_ns"))


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


__all__ = ["MAX_VALUE_BYTES", "StatecoreSaver"]
