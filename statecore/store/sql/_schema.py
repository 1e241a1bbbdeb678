"""The SQL schema: typed declarative models, the single source the migrations must match.

Store modules use the Core tables (``SessionRow.__table__`` ...) on one connection; ORM
objects never leave this package. ``tests/store/test_migrations.py`` proves that the Alembic
revisions build exactly this metadata.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from statecore.core._models import MAX_ID_LENGTH, MAX_KEY_LENGTH
from statecore.store.sql._types import (
    UtcDateTime,
    ascii_id,
    big_pk,
    long_blob,
    long_text,
    medium_blob,
    medium_text,
)

#: Every statecore table starts with this, so statecore can share a database with the
#: application that uses it (whose own tables may well be called ``sessions`` or ``messages``).
TABLE_PREFIX = "statecore_"
#: Alembic's version table for statecore's revisions, apart from the application's own
#: ``alembic_version``.
VERSION_TABLE = TABLE_PREFIX + "alembic_version"

#: Constraint names are derived, never left to the database, so a migration can name what
#: it alters on every dialect.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: "agent_id/session_id", the owner of a session's KV rows.
OWNER_LENGTH = 2 * MAX_ID_LENGTH + 1

_MYSQL_TABLE = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _session_fk() -> ForeignKey:
    return ForeignKey(f"{SessionRow.__tablename__}.id", ondelete="CASCADE")


class SessionRow(Base):
    """One agent session: its identity, log counters, prompt, summary and idle clock."""

    __tablename__ = TABLE_PREFIX + "sessions"
    __table_args__ = (
        UniqueConstraint("namespace", "agent_id", "session_id"),
        _MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(big_pk(), primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    agent_id: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    session_id: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    system_prompt: Mapped[str | None] = mapped_column(medium_text())
    last_seq: Mapped[int] = mapped_column(BigInteger)
    message_count: Mapped[int] = mapped_column(BigInteger)
    token_total: Mapped[int] = mapped_column(BigInteger)
    window_start_seq: Mapped[int] = mapped_column(BigInteger)
    summary_text: Mapped[str | None] = mapped_column(medium_text())
    summary_through_seq: Mapped[int | None] = mapped_column(BigInteger)
    summary_tokens: Mapped[int | None] = mapped_column(Integer)
    summary_created_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    last_accessed: Mapped[datetime] = mapped_column(UtcDateTime())
    ttl_seconds: Mapped[int] = mapped_column(Integer)
    #: last_accessed + ttl_seconds, kept on every touch so finding idle sessions is an
    #: index range scan.
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)


class MessageRow(Base):
    """One message of a session's log; ``cumulative_tokens`` makes the window one query."""

    __tablename__ = TABLE_PREFIX + "messages"
    __table_args__ = (
        # Idempotent appends: a replayed turn finds its messages here.
        UniqueConstraint("session_pk", "turn_id", "idx"),
        # Every message costs >= 3 tokens, so cumulative_tokens strictly increases with seq
        # and the window boundary is a seek on this index.
        Index(None, "session_pk", "cumulative_tokens"),
        _MYSQL_TABLE,
    )

    session_pk: Mapped[int] = mapped_column(big_pk(), _session_fk(), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    turn_id: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    idx: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(medium_text())
    name: Mapped[str | None] = mapped_column(String(256))
    tool_calls: Mapped[str | None] = mapped_column(medium_text())
    tool_call_id: Mapped[str | None] = mapped_column(String(256))
    metadata_json: Mapped[str | None] = mapped_column(medium_text())
    tokens: Mapped[int] = mapped_column(Integer)
    cumulative_tokens: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    #: Set when the message was taken back (a framework session's ``pop_item``): readers skip
    #: it, the row stays for audit. Only a reset deletes messages.
    retracted_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class HintRow(Base):
    """A standing instruction injected after the summary."""

    __tablename__ = TABLE_PREFIX + "hints"
    # AUTOINCREMENT on SQLite so a removed hint's id is never handed out again.
    __table_args__ = ({"sqlite_autoincrement": True, **_MYSQL_TABLE},)

    id: Mapped[int] = mapped_column(big_pk(), primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(big_pk(), _session_fk(), index=True)
    text: Mapped[str] = mapped_column(medium_text())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class KVEntryRow(Base):
    """A key of a bucket, owned by a namespace (owner '') or a session ('agent/session')."""

    __tablename__ = TABLE_PREFIX + "kv_entries"
    __table_args__ = (
        UniqueConstraint("namespace", "owner", "bucket", "key"),
        _MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(big_pk(), primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    owner: Mapped[str] = mapped_column(ascii_id(OWNER_LENGTH))
    bucket: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    key: Mapped[str] = mapped_column(ascii_id(MAX_KEY_LENGTH))
    #: 'json' (value is UTF-8 JSON text) or 'bytes' (value is raw).
    kind: Mapped[str] = mapped_column(String(8))
    #: Up to MAX_KV_VALUE_BYTES (16 MiB): one byte more than MariaDB's MEDIUMBLOB holds.
    value: Mapped[bytes] = mapped_column(long_blob())
    revision: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), index=True)


class TurnRecordRow(Base):
    """What a committed turn returned (``statecore.operations._turn_record``): a replayed commit of
    the turn id finds it and answers from it. Keyed by the session's surrogate key, so a
    record costs its turn id and a short JSON array, not a KV row's scope columns."""

    __tablename__ = TABLE_PREFIX + "turn_records"
    __table_args__ = (_MYSQL_TABLE,)

    session_pk: Mapped[int] = mapped_column(
        big_pk(), _session_fk(), primary_key=True, autoincrement=False
    )
    turn_id: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH), primary_key=True)
    record: Mapped[str] = mapped_column(medium_text())


class TurnStreamRow(Base):
    """A running turn's reply so far (``statecore.store._turn_streams``): rewritten by the model
    call as it streams, removed once the turn commits, deleted with its session."""

    __tablename__ = TABLE_PREFIX + "turn_streams"
    __table_args__ = (_MYSQL_TABLE,)

    session_pk: Mapped[int] = mapped_column(
        big_pk(), _session_fk(), primary_key=True, autoincrement=False
    )
    turn_id: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH), primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(medium_text())
    #: The tool calls so far, as a JSON array of {id, name, arguments}.
    tool_calls: Mapped[str] = mapped_column(medium_text())
    #: 1 when the text reached its bound and grows no more.
    full: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class ScopedStateRow(Base):
    """One JSON document per (namespace, task_id, agent_id)."""

    __tablename__ = TABLE_PREFIX + "scoped_states"
    __table_args__ = (
        UniqueConstraint("namespace", "task_id", "agent_id"),
        _MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(big_pk(), primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    task_id: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    agent_id: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    document: Mapped[str] = mapped_column(long_text())
    version: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class FlowCheckpointRow(Base):
    """One checkpoint of a flow; every version is kept."""

    __tablename__ = TABLE_PREFIX + "flow_checkpoints"
    __table_args__ = (
        UniqueConstraint("session_pk", "flow_id", "version"),
        _MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(big_pk(), primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(big_pk(), _session_fk())
    flow_id: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    version: Mapped[int] = mapped_column(BigInteger)
    step: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    data: Mapped[str] = mapped_column(long_text())
    conversation_seq: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class OrchestrationRow(Base):
    """A session's orchestration state; last access and TTL live on the session row."""

    __tablename__ = TABLE_PREFIX + "orchestration_states"
    __table_args__ = (_MYSQL_TABLE,)

    session_pk: Mapped[int] = mapped_column(
        big_pk(), _session_fk(), primary_key=True, autoincrement=False
    )
    active_step: Mapped[str | None] = mapped_column(ascii_id(MAX_ID_LENGTH))
    #: JSON list of tool names, most recent last.
    recently_used_tools: Mapped[str] = mapped_column(medium_text())
    sequence_index: Mapped[int] = mapped_column(BigInteger)
    prompt_tokens: Mapped[int] = mapped_column(BigInteger)
    completion_tokens: Mapped[int] = mapped_column(BigInteger)


#: A SHA-256 digest in hex: the key of a LangGraph thread, namespace, channel, task or run,
#: whose names may be any string of any length (InnoDB caps an index at 3072 bytes).
DIGEST_LENGTH = 64
#: A LangGraph checkpoint id (a UUIDv6 string) or channel version, as stored.
GRAPH_ID_LENGTH = 128


class GraphCheckpointRow(Base):
    """One LangGraph checkpoint (``StatecoreSaver``) without its channel values, which live
    once per version in GraphBlobRow. The primary key orders a namespace's checkpoints
    newest first."""

    __tablename__ = TABLE_PREFIX + "graph_checkpoints"
    __table_args__ = (Index(None, "run_key"), _MYSQL_TABLE)

    thread_key: Mapped[str] = mapped_column(ascii_id(DIGEST_LENGTH), primary_key=True)
    ns_key: Mapped[str] = mapped_column(ascii_id(DIGEST_LENGTH), primary_key=True)
    checkpoint_id: Mapped[str] = mapped_column(ascii_id(GRAPH_ID_LENGTH), primary_key=True)
    #: The names themselves, as UTF-8 (bytes, so a NUL character survives PostgreSQL).
    thread_id: Mapped[bytes] = mapped_column(medium_blob())
    checkpoint_ns: Mapped[bytes] = mapped_column(medium_blob())
    parent_checkpoint_id: Mapped[str | None] = mapped_column(ascii_id(GRAPH_ID_LENGTH))
    #: Digest of ``metadata["run_id"]``, for ``delete_for_runs``.
    run_key: Mapped[str | None] = mapped_column(ascii_id(DIGEST_LENGTH))
    checkpoint_type: Mapped[str] = mapped_column(String(32))
    checkpoint: Mapped[bytes] = mapped_column(medium_blob())
    meta_type: Mapped[str] = mapped_column(String(32))
    meta: Mapped[bytes] = mapped_column(medium_blob())


class GraphBlobRow(Base):
    """The value of one channel at one version: written when the version is new, never
    rewritten, shared by every checkpoint that still has that version."""

    __tablename__ = TABLE_PREFIX + "graph_blobs"
    __table_args__ = (_MYSQL_TABLE,)

    thread_key: Mapped[str] = mapped_column(ascii_id(DIGEST_LENGTH), primary_key=True)
    ns_key: Mapped[str] = mapped_column(ascii_id(DIGEST_LENGTH), primary_key=True)
    channel_key: Mapped[str] = mapped_column(ascii_id(DIGEST_LENGTH), primary_key=True)
    version: Mapped[str] = mapped_column(ascii_id(GRAPH_ID_LENGTH), primary_key=True)
    #: The serializer's type tag; "empty" for a channel versioned without a value.
    value_type: Mapped[str] = mapped_column(String(32))
    value: Mapped[bytes] = mapped_column(medium_blob())


class GraphWriteRow(Base):
    """A pending write of a task against a checkpoint, with its task path (the order a
    super-step applies writes in)."""

    __tablename__ = TABLE_PREFIX + "graph_writes"
    __table_args__ = (_MYSQL_TABLE,)

    thread_key: Mapped[str] = mapped_column(ascii_id(DIGEST_LENGTH), primary_key=True)
    ns_key: Mapped[str] = mapped_column(ascii_id(DIGEST_LENGTH), primary_key=True)
    checkpoint_id: Mapped[str] = mapped_column(ascii_id(GRAPH_ID_LENGTH), primary_key=True)
    task_key: Mapped[str] = mapped_column(ascii_id(DIGEST_LENGTH), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    task_id: Mapped[bytes] = mapped_column(medium_blob())
    task_path: Mapped[bytes] = mapped_column(medium_blob())
    channel: Mapped[bytes] = mapped_column(medium_blob())
    value_type: Mapped[str] = mapped_column(String(32))
    value: Mapped[bytes] = mapped_column(medium_blob())


class EventRow(Base):
    """One event of a namespace's change feed: what a commit touched (ids, sizes), never
    the content. ``seq`` counts 1, 2, 3, ... per namespace in commit order."""

    __tablename__ = TABLE_PREFIX + "events"
    __table_args__ = (
        UniqueConstraint("namespace", "seq"),
        Index(None, "created_at"),
        _MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(big_pk(), primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH))
    seq: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(32))
    agent_id: Mapped[str | None] = mapped_column(ascii_id(MAX_ID_LENGTH))
    session_id: Mapped[str | None] = mapped_column(ascii_id(MAX_ID_LENGTH))
    turn_id: Mapped[str | None] = mapped_column(ascii_id(MAX_ID_LENGTH))
    detail: Mapped[str] = mapped_column(medium_text())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class EventHeadRow(Base):
    """The last event number of each namespace. Its row lock, held from numbering to commit,
    is what keeps concurrent commits' numbers in commit order (statecore.store.sql._events)."""

    __tablename__ = TABLE_PREFIX + "event_heads"
    __table_args__ = (_MYSQL_TABLE,)

    namespace: Mapped[str] = mapped_column(ascii_id(MAX_ID_LENGTH), primary_key=True)
    last_seq: Mapped[int] = mapped_column(BigInteger)


#: A blob's key: the SHA-256 of the stored payload's bytes, in lower-case hex.
BLOB_DIGEST_LENGTH = 64
#: Temporal's own caps on a namespace name and a workflow or activity id.
TEMPORAL_NAMESPACE_LENGTH = 255
TEMPORAL_ID_LENGTH = 1000


class BlobRow(Base):
    """One payload stored by reference (Temporal's external storage): written once, read by
    its digest, deleted only by the sweep (statecore.store.sql._blobs)."""

    __tablename__ = TABLE_PREFIX + "blobs"
    __table_args__ = (_MYSQL_TABLE,)

    digest: Mapped[str] = mapped_column(ascii_id(BLOB_DIGEST_LENGTH), primary_key=True)
    #: "raw" or "zlib": how ``data`` holds the payload's bytes.
    encoding: Mapped[str] = mapped_column(String(8))
    #: The payload's size as Temporal serialised it, and as stored after compression.
    size: Mapped[int] = mapped_column(BigInteger)
    stored_size: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes] = mapped_column(long_blob())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class BlobRefRow(Base):
    """A workflow (or activity) a blob was stored for: the history that may hold its claim.

    The foreign key has no ON DELETE action on purpose: a blob that gains a reference while
    the sweep deletes it makes the sweep's DELETE fail instead of leaving a dangling claim."""

    __tablename__ = TABLE_PREFIX + "blob_refs"
    __table_args__ = (Index(None, "target_key"), _MYSQL_TABLE)

    digest: Mapped[str] = mapped_column(
        ascii_id(BLOB_DIGEST_LENGTH),
        ForeignKey(f"{BlobRow.__tablename__}.digest"),
        primary_key=True,
    )
    #: SHA-256 (hex) of the target's kind, namespace, id and run id: ids may be 1,000
    #: characters of any script, too long and too varied for a composite key.
    target_key: Mapped[str] = mapped_column(ascii_id(BLOB_DIGEST_LENGTH), primary_key=True)
    #: "workflow", "activity" (a standalone activity) or "none" (stored with no target).
    kind: Mapped[str] = mapped_column(String(16))
    namespace: Mapped[str] = mapped_column(String(TEMPORAL_NAMESPACE_LENGTH))
    target_id: Mapped[str] = mapped_column(String(TEMPORAL_ID_LENGTH))
    run_id: Mapped[str] = mapped_column(String(64))
    first_stored_at: Mapped[datetime] = mapped_column(UtcDateTime())
    last_stored_at: Mapped[datetime] = mapped_column(UtcDateTime())


metadata = Base.metadata
# Looked up in the metadata (typed Table) rather than read from ``Row.__table__`` (typed as
# any FromClause), so insert/update/delete accept them as they are.
sessions = metadata.tables[SessionRow.__tablename__]
messages = metadata.tables[MessageRow.__tablename__]
hints = metadata.tables[HintRow.__tablename__]
kv_entries = metadata.tables[KVEntryRow.__tablename__]
turn_records = metadata.tables[TurnRecordRow.__tablename__]
turn_streams = metadata.tables[TurnStreamRow.__tablename__]
scoped_states = metadata.tables[ScopedStateRow.__tablename__]
flow_checkpoints = metadata.tables[FlowCheckpointRow.__tablename__]
orchestration_states = metadata.tables[OrchestrationRow.__tablename__]
graph_checkpoints = metadata.tables[GraphCheckpointRow.__tablename__]
graph_blobs = metadata.tables[GraphBlobRow.__tablename__]
graph_writes = metadata.tables[GraphWriteRow.__tablename__]
events = metadata.tables[EventRow.__tablename__]
event_heads = metadata.tables[EventHeadRow.__tablename__]
blobs = metadata.tables[BlobRow.__tablename__]
blob_refs = metadata.tables[BlobRefRow.__tablename__]
