"""Initial schema: sessions, messages, hints, KV, scoped state, flow, orchestration.

Revision ID: 0001
Revises:
Create Date: 2026-01-01

Lengths are written out (not taken from statecore.core._models) so that this revision keeps
building the same schema whatever later code changes.
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from statecore.store.sql._types import (
    UtcDateTime,
    ascii_id,
    big_pk,
    long_text,
    medium_blob,
    medium_text,
)

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128
OWNER = 257
KEY = 512
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def _session_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["session_pk"],
        ["sessions.id"],
        name=op.f(f"fk_{table}_session_pk_sessions"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", big_pk(), autoincrement=True, nullable=False),
        sa.Column("namespace", ascii_id(ID), nullable=False),
        sa.Column("agent_id", ascii_id(ID), nullable=False),
        sa.Column("session_id", ascii_id(ID), nullable=False),
        sa.Column("system_prompt", medium_text(), nullable=True),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("message_count", sa.BigInteger(), nullable=False),
        sa.Column("token_total", sa.BigInteger(), nullable=False),
        sa.Column("window_start_seq", sa.BigInteger(), nullable=False),
        sa.Column("summary_text", medium_text(), nullable=True),
        sa.Column("summary_through_seq", sa.BigInteger(), nullable=True),
        sa.Column("summary_tokens", sa.Integer(), nullable=True),
        sa.Column("summary_created_at", UtcDateTime(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("last_accessed", UtcDateTime(), nullable=False),
        sa.Column("ttl_seconds", sa.Integer(), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
        sa.UniqueConstraint(
            "namespace",
            "agent_id",
            "session_id",
            name=op.f("uq_sessions_namespace_agent_id_session_id"),
        ),
        **MYSQL,
    )
    op.create_index(op.f("ix_sessions_expires_at"), "sessions", ["expires_at"])

    op.create_table(
        "messages",
        sa.Column("session_pk", big_pk(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("turn_id", ascii_id(ID), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", medium_text(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=True),
        sa.Column("tool_calls", medium_text(), nullable=True),
        sa.Column("tool_call_id", sa.String(length=256), nullable=True),
        sa.Column("metadata_json", medium_text(), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("cumulative_tokens", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        _session_fk("messages"),
        sa.PrimaryKeyConstraint("session_pk", "seq", name=op.f("pk_messages")),
        sa.UniqueConstraint(
            "session_pk", "turn_id", "idx", name=op.f("uq_messages_session_pk_turn_id_idx")
        ),
        **MYSQL,
    )
    op.create_index(
        op.f("ix_messages_session_pk_cumulative_tokens"),
        "messages",
        ["session_pk", "cumulative_tokens"],
    )

    op.create_table(
        "hints",
        sa.Column("id", big_pk(), autoincrement=True, nullable=False),
        sa.Column("session_pk", big_pk(), nullable=False),
        sa.Column("text", medium_text(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        _session_fk("hints"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hints")),
        sqlite_autoincrement=True,
        **MYSQL,
    )
    op.create_index(op.f("ix_hints_session_pk"), "hints", ["session_pk"])

    op.create_table(
        "kv_entries",
        sa.Column("id", big_pk(), autoincrement=True, nullable=False),
        sa.Column("namespace", ascii_id(ID), nullable=False),
        sa.Column("owner", ascii_id(OWNER), nullable=False),
        sa.Column("bucket", ascii_id(ID), nullable=False),
        sa.Column("key", ascii_id(KEY), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("value", medium_blob(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kv_entries")),
        sa.UniqueConstraint(
            "namespace",
            "owner",
            "bucket",
            "key",
            name=op.f("uq_kv_entries_namespace_owner_bucket_key"),
        ),
        **MYSQL,
    )
    op.create_index(op.f("ix_kv_entries_expires_at"), "kv_entries", ["expires_at"])

    op.create_table(
        "scoped_states",
        sa.Column("id", big_pk(), autoincrement=True, nullable=False),
        sa.Column("namespace", ascii_id(ID), nullable=False),
        sa.Column("task_id", ascii_id(ID), nullable=False),
        sa.Column("agent_id", ascii_id(ID), nullable=False),
        sa.Column("document", long_text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scoped_states")),
        sa.UniqueConstraint(
            "namespace",
            "task_id",
            "agent_id",
            name=op.f("uq_scoped_states_namespace_task_id_agent_id"),
        ),
        **MYSQL,
    )

    op.create_table(
        "flow_checkpoints",
        sa.Column("id", big_pk(), autoincrement=True, nullable=False),
        sa.Column("session_pk", big_pk(), nullable=False),
        sa.Column("flow_id", ascii_id(ID), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("step", ascii_id(ID), nullable=False),
        sa.Column("data", long_text(), nullable=False),
        sa.Column("conversation_seq", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        _session_fk("flow_checkpoints"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flow_checkpoints")),
        sa.UniqueConstraint(
            "session_pk",
            "flow_id",
            "version",
            name=op.f("uq_flow_checkpoints_session_pk_flow_id_version"),
        ),
        **MYSQL,
    )

    op.create_table(
        "orchestration_states",
        sa.Column("session_pk", big_pk(), autoincrement=False, nullable=False),
        sa.Column("active_step", ascii_id(ID), nullable=True),
        sa.Column("recently_used_tools", medium_text(), nullable=False),
        sa.Column("sequence_index", sa.BigInteger(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        _session_fk("orchestration_states"),
        sa.PrimaryKeyConstraint("session_pk", name=op.f("pk_orchestration_states")),
        **MYSQL,
    )


def downgrade() -> None:
    # Dropping a table drops its indexes (MySQL refuses to drop an index a foreign key uses).
    for table in (
        "orchestration_states",
        "flow_checkpoints",
        "scoped_states",
        "kv_entries",
        "hints",
        "messages",
        "sessions",
    ):
        op.drop_table(table)
