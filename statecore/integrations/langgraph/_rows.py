"""The SQL of StatecoreSaver: statements over one open connection, bytes in and bytes out.

Serialisation, size limits and LangGraph's types stay in ``saver``; nothing here commits
(the caller owns the transaction). Every read is an index seek on a primary key prefix:
(thread_key, ns_key, checkpoint_id) lists a namespace newest first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, false, insert, literal, or_, select, update
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.expression import ColumnElement

from statecore.store.sql._schema import graph_blobs, graph_checkpoints, graph_writes

#: A result row (SQLAlchemy's Row, whose typed form varies with the columns selected).
DbRow = Any

#: Rows named in one IN list; well below every dialect's bound-parameter limit.
IN_CHUNK = 400

CHECKPOINT_COLUMNS = (
    graph_checkpoints.c.thread_key,
    graph_checkpoints.c.ns_key,
    graph_checkpoints.c.checkpoint_id,
    graph_checkpoints.c.thread_id,
    graph_checkpoints.c.checkpoint_ns,
    graph_checkpoints.c.parent_checkpoint_id,
    graph_checkpoints.c.checkpoint_type,
    graph_checkpoints.c.checkpoint,
    graph_checkpoints.c.meta_type,
    graph_checkpoints.c.meta,
)


@dataclass(frozen=True)
class Scope:
    """One namespace of one thread, by key."""

    thread_key: str
    ns_key: str


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), IN_CHUNK):
        yield items[start : start + IN_CHUNK]


def _insert_ignoring_duplicates(dialect: str, table: Any, keys: Sequence[str]) -> Any:
    """An INSERT (executemany-able) that leaves an existing row with the same key as it is."""
    if dialect == "mysql":
        statement: Any = mysql.insert(table)
        return statement.on_duplicate_key_update({keys[0]: statement.inserted[keys[0]]})
    module = postgresql if dialect == "postgresql" else sqlite
    return module.insert(table).on_conflict_do_nothing(index_elements=list(keys))


def _insert_replacing(dialect: str, table: Any, keys: Sequence[str]) -> Any:
    """An INSERT (executemany-able) that overwrites the non-key columns of an existing row."""
    others = [c.name for c in table.columns if c.name not in keys]
    if dialect == "mysql":
        statement: Any = mysql.insert(table)
        return statement.on_duplicate_key_update({c: statement.inserted[c] for c in others})
    module = postgresql if dialect == "postgresql" else sqlite
    statement = module.insert(table)
    return statement.on_conflict_do_update(
        index_elements=list(keys), set_={c: statement.excluded[c] for c in others}
    )


_CHECKPOINT_KEY = ("thread_key", "ns_key", "checkpoint_id")
_BLOB_KEY = ("thread_key", "ns_key", "channel_key", "version")
_WRITE_KEY = ("thread_key", "ns_key", "checkpoint_id", "task_key", "idx")


async def put_checkpoint(
    conn: AsyncConnection,
    dialect: str,
    checkpoint: Mapping[str, Any],
    blobs: Sequence[Mapping[str, Any]],
) -> None:
    """Store a checkpoint row and the blobs of the channel versions it is the first to have.
    A blob already stored for its version is left alone (the same version is the same value),
    so a retried put writes nothing twice."""
    if blobs:
        await conn.execute(_insert_ignoring_duplicates(dialect, graph_blobs, _BLOB_KEY), blobs)
    await conn.execute(
        _insert_replacing(dialect, graph_checkpoints, _CHECKPOINT_KEY), [dict(checkpoint)]
    )


async def put_writes(
    conn: AsyncConnection,
    dialect: str,
    first_wins: Sequence[Mapping[str, Any]],
    last_wins: Sequence[Mapping[str, Any]],
) -> None:
    """Regular writes keep the first value stored for their (task, idx), as LangGraph's
    savers do; special writes (errors, interrupts, resumes: negative idx) are replaced."""
    if first_wins:
        await conn.execute(
            _insert_ignoring_duplicates(dialect, graph_writes, _WRITE_KEY), list(first_wins)
        )
    if last_wins:
        await conn.execute(_insert_replacing(dialect, graph_writes, _WRITE_KEY), list(last_wins))


def _scope_filter(table: Any, scope: Scope) -> ColumnElement[bool]:
    return and_(table.c.thread_key == scope.thread_key, table.c.ns_key == scope.ns_key)


async def checkpoint_with_writes(
    conn: AsyncConnection, scope: Scope, checkpoint_id: str | None
) -> list[DbRow]:
    """One query: the checkpoint (the newest of the namespace when ``checkpoint_id`` is None)
    joined to its pending writes, one row per write (one row with NULL writes when it has
    none); [] when there is no such checkpoint."""
    c = graph_checkpoints
    chosen = select(*CHECKPOINT_COLUMNS).where(_scope_filter(c, scope))
    if checkpoint_id is not None:
        chosen = chosen.where(c.c.checkpoint_id == checkpoint_id)
    else:
        chosen = chosen.order_by(c.c.checkpoint_id.desc()).limit(1)
    head = chosen.subquery("head")
    w = graph_writes
    query = select(
        head,
        w.c.task_id.label("w_task_id"),
        w.c.task_path.label("w_task_path"),
        w.c.idx.label("w_idx"),
        w.c.channel.label("w_channel"),
        w.c.value_type.label("w_value_type"),
        w.c.value.label("w_value"),
    ).select_from(
        head.outerjoin(
            w,
            and_(
                w.c.thread_key == head.c.thread_key,
                w.c.ns_key == head.c.ns_key,
                w.c.checkpoint_id == head.c.checkpoint_id,
            ),
        )
    )
    return list((await conn.execute(query)).all())


async def list_checkpoints(
    conn: AsyncConnection,
    *,
    thread_key: str | None,
    ns_key: str | None,
    checkpoint_id: str | None,
    before_id: str | None,
    page: int,
) -> list[DbRow]:
    """Up to ``page`` checkpoint rows, newest first, with ids below ``before_id``."""
    c = graph_checkpoints
    query = select(*CHECKPOINT_COLUMNS)
    if thread_key is not None:
        query = query.where(c.c.thread_key == thread_key)
    if ns_key is not None:
        query = query.where(c.c.ns_key == ns_key)
    if checkpoint_id is not None:
        query = query.where(c.c.checkpoint_id == checkpoint_id)
    if before_id is not None:
        query = query.where(c.c.checkpoint_id < before_id)
    query = query.order_by(
        c.c.checkpoint_id.desc(), c.c.thread_key.desc(), c.c.ns_key.desc()
    ).limit(page)
    return list((await conn.execute(query)).all())


async def writes_of(
    conn: AsyncConnection, scope: Scope, checkpoint_ids: Sequence[str]
) -> list[DbRow]:
    """The pending writes of the given checkpoints of one namespace (in no order)."""
    w = graph_writes
    found: list[DbRow] = []
    for chunk in _chunks(list(dict.fromkeys(checkpoint_ids))):
        query = select(
            w.c.checkpoint_id,
            w.c.task_id,
            w.c.task_path,
            w.c.idx,
            w.c.channel,
            w.c.value_type,
            w.c.value,
        ).where(_scope_filter(w, scope), w.c.checkpoint_id.in_(chunk))
        found.extend((await conn.execute(query)).all())
    return found


async def blobs_of(
    conn: AsyncConnection,
    scope: Scope,
    wanted: Sequence[tuple[str, str]],
    *,
    with_values: bool = True,
) -> dict[tuple[str, str], tuple[str, bytes]]:
    """(channel_key, version) -> (type, value) for the blobs stored of ``wanted``."""
    b = graph_blobs
    columns = [b.c.channel_key, b.c.version, b.c.value_type]
    if with_values:
        columns.append(b.c.value)
    # One statement per channel with an expanding IN of its versions: the same compiled
    # statement every time (an OR of pairs would be compiled anew for each call).
    versions_by_channel: dict[str, list[str]] = {}
    for channel_key, version in dict.fromkeys(wanted):
        versions_by_channel.setdefault(channel_key, []).append(version)
    found: dict[tuple[str, str], tuple[str, bytes]] = {}
    for channel_key, versions in versions_by_channel.items():
        for chunk in _chunks(versions):
            query = select(*columns).where(
                _scope_filter(b, scope), b.c.channel_key == channel_key, b.c.version.in_(chunk)
            )
            for row in (await conn.execute(query)).all():
                found[(row.channel_key, row.version)] = (
                    row.value_type,
                    row.value if with_values else b"",
                )
    return found


async def checkpoint_rows(
    conn: AsyncConnection, scope: Scope, *, at_or_below: str | None, page: int
) -> list[DbRow]:
    """A page of a namespace's checkpoints (id, parent, payload), newest first."""
    c = graph_checkpoints
    query = select(
        c.c.checkpoint_id,
        c.c.parent_checkpoint_id,
        c.c.checkpoint_type,
        c.c.checkpoint,
        c.c.meta_type,
        c.c.meta,
    ).where(_scope_filter(c, scope))
    if at_or_below is not None:
        query = query.where(c.c.checkpoint_id <= at_or_below)
    query = query.order_by(c.c.checkpoint_id.desc()).limit(page)
    return list((await conn.execute(query)).all())


async def scopes_of_threads(conn: AsyncConnection, thread_keys: Sequence[str]) -> list[Scope]:
    c = graph_checkpoints
    query = (
        select(c.c.thread_key, c.c.ns_key)
        .where(c.c.thread_key.in_(list(thread_keys)))
        .group_by(c.c.thread_key, c.c.ns_key)
    )
    return [Scope(r.thread_key, r.ns_key) for r in (await conn.execute(query)).all()]


async def delete_threads(conn: AsyncConnection, thread_keys: Sequence[str]) -> None:
    for chunk in _chunks(list(thread_keys)):
        for table in (graph_writes, graph_blobs, graph_checkpoints):
            await conn.execute(delete(table).where(table.c.thread_key.in_(chunk)))


async def checkpoints_of_runs(
    conn: AsyncConnection, run_keys: Sequence[str]
) -> list[tuple[Scope, str]]:
    c = graph_checkpoints
    found: list[tuple[Scope, str]] = []
    for chunk in _chunks(list(run_keys)):
        query = select(c.c.thread_key, c.c.ns_key, c.c.checkpoint_id).where(c.c.run_key.in_(chunk))
        for r in (await conn.execute(query)).all():
            found.append((Scope(r.thread_key, r.ns_key), r.checkpoint_id))
    return found


async def delete_checkpoints(
    conn: AsyncConnection, scope: Scope, checkpoint_ids: Sequence[str]
) -> None:
    """Delete checkpoints of one namespace with their writes (blobs: see delete_blobs)."""
    for chunk in _chunks(list(checkpoint_ids)):
        for table in (graph_writes, graph_checkpoints):
            await conn.execute(
                delete(table).where(_scope_filter(table, scope), table.c.checkpoint_id.in_(chunk))
            )


async def orphan_children(conn: AsyncConnection, scope: Scope, removed: Sequence[str]) -> None:
    """Checkpoints whose parent was deleted become roots, as LangGraph's savers leave them."""
    c = graph_checkpoints
    for chunk in _chunks(list(removed)):
        await conn.execute(
            update(c)
            .where(_scope_filter(c, scope), c.c.parent_checkpoint_id.in_(chunk))
            .values(parent_checkpoint_id=None)
        )


async def blob_keys(conn: AsyncConnection, scope: Scope) -> list[tuple[str, str]]:
    b = graph_blobs
    query = select(b.c.channel_key, b.c.version).where(_scope_filter(b, scope))
    return [(r.channel_key, r.version) for r in (await conn.execute(query)).all()]


async def delete_blobs(
    conn: AsyncConnection, scope: Scope, keys: Sequence[tuple[str, str]]
) -> None:
    b = graph_blobs
    for chunk in _chunks(list(keys)):
        pairs = or_(false(), *(and_(b.c.channel_key == ch, b.c.version == v) for ch, v in chunk))
        await conn.execute(delete(b).where(_scope_filter(b, scope), pairs))


async def copy_thread(
    conn: AsyncConnection, source_key: str, target_key: str, target_name: bytes
) -> None:
    """Copy every row of a thread under another thread key, in the database."""
    for table in (graph_blobs, graph_checkpoints, graph_writes):
        columns = [c.name for c in table.columns]
        sources: list[Any] = []
        for name in columns:
            if name == "thread_key":
                sources.append(literal(target_key).label(name))
            elif name == "thread_id":
                sources.append(literal(target_name, type_=table.c.thread_id.type).label(name))
            else:
                sources.append(table.c[name])
        await conn.execute(
            insert(table).from_select(
                columns, select(*sources).where(table.c.thread_key == source_key)
            )
        )


async def thread_exists(conn: AsyncConnection, thread_key: str) -> bool:
    c = graph_checkpoints
    query = select(c.c.checkpoint_id).where(c.c.thread_key == thread_key).limit(1)
    return (await conn.execute(query)).first() is not None


async def latest_segment(
    conn: AsyncConnection, scope: Scope, channel_key: str, prefix: str
) -> DbRow | None:
    """The newest blob of a channel whose type starts with ``prefix`` (a list snapshot)."""
    b = graph_blobs
    query = (
        select(b.c.version, b.c.value_type, b.c.value)
        .where(
            _scope_filter(b, scope),
            b.c.channel_key == channel_key,
            b.c.value_type.startswith(prefix, autoescape=True),
        )
        .order_by(b.c.version.desc())
        .limit(1)
    )
    return (await conn.execute(query)).first()


async def segments_of(
    conn: AsyncConnection, scope: Scope, channel_keys: Sequence[str] | None, prefix: str
) -> list[DbRow]:
    """Every list-snapshot segment of the given channels (of every channel: None)."""
    b = graph_blobs
    query = select(b.c.channel_key, b.c.version, b.c.value_type, b.c.value).where(
        _scope_filter(b, scope), b.c.value_type.startswith(prefix, autoescape=True)
    )
    if channel_keys is not None:
        query = query.where(b.c.channel_key.in_(list(channel_keys)))
    return list((await conn.execute(query)).all())
