"""Tables for LangGraph checkpoints (``statecore.integrations.langgraph.StatecoreSaver``).

Revision ID: 0004_langgraph_checkpoints
Revises: 0003_message_retraction
Create Date: 2026-11-25

Three tables, after LangGraph's own savers: checkpoints without their channel values, one
blob per (thread, namespace, channel, version) so an unchanged channel is never written
again, and pending writes with their task path. Threads, namespaces, channels, tasks and
runs may be named by any string, so rows are keyed by the SHA-256 of the name (an index on
the name itself would pass InnoDB's 3072-byte key limit); the names are kept as UTF-8 bytes.

Names are written out (not taken from statecore.store.sql._schema) so that this revision keeps
doing the same thing whatever later code changes.
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from statecore.store.sql._types import ascii_id, medium_blob

revision: str = "0004_langgraph_checkpoints"
down_revision: str | None = "0003_message_retraction"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKPOINTS = "statecore_graph_checkpoints"
BLOBS = "statecore_graph_blobs"
WRITES = "statecore_graph_writes"
DIGEST = 64
GRAPH_ID = 128
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def _key(name: str) -> sa.Column[Any]:
    return sa.Column(name, ascii_id(DIGEST), nullable=False)


def upgrade() -> None:
    op.create_table(
        CHECKPOINTS,
        _key("thread_key"),
        _key("ns_key"),
        sa.Column("checkpoint_id", ascii_id(GRAPH_ID), nullable=False),
        sa.Column("thread_id", medium_blob(), nullable=False),
        sa.Column("checkpoint_ns", medium_blob(), nullable=False),
        sa.Column("parent_checkpoint_id", ascii_id(GRAPH_ID), nullable=True),
        sa.Column("run_key", ascii_id(DIGEST), nullable=True),
        sa.Column("checkpoint_type", sa.String(length=32), nullable=False),
        sa.Column("checkpoint", medium_blob(), nullable=False),
        sa.Column("meta_type", sa.String(length=32), nullable=False),
        sa.Column("meta", medium_blob(), nullable=False),
        sa.PrimaryKeyConstraint(
            "thread_key", "ns_key", "checkpoint_id", name=op.f(f"pk_{CHECKPOINTS}")
        ),
        **MYSQL,
    )
    op.create_index(op.f(f"ix_{CHECKPOINTS}_run_key"), CHECKPOINTS, ["run_key"])

    op.create_table(
        BLOBS,
        _key("thread_key"),
        _key("ns_key"),
        _key("channel_key"),
        sa.Column("version", ascii_id(GRAPH_ID), nullable=False),
        sa.Column("value_type", sa.String(length=32), nullable=False),
        sa.Column("value", medium_blob(), nullable=False),
        sa.PrimaryKeyConstraint(
            "thread_key", "ns_key", "channel_key", "version", name=op.f(f"pk_{BLOBS}")
        ),
        **MYSQL,
    )

    op.create_table(
        WRITES,
        _key("thread_key"),
        _key("ns_key"),
        sa.Column("checkpoint_id", ascii_id(GRAPH_ID), nullable=False),
        _key("task_key"),
        sa.Column("idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("task_id", medium_blob(), nullable=False),
        sa.Column("task_path", medium_blob(), nullable=False),
        sa.Column("channel", medium_blob(), nullable=False),
        sa.Column("value_type", sa.String(length=32), nullable=False),
        sa.Column("value", medium_blob(), nullable=False),
        sa.PrimaryKeyConstraint(
            "thread_key", "ns_key", "checkpoint_id", "task_key", "idx", name=op.f(f"pk_{WRITES}")
        ),
        **MYSQL,
    )


def downgrade() -> None:
    op.drop_table(WRITES)
    op.drop_table(BLOBS)
    op.drop_index(op.f(f"ix_{CHECKPOINTS}_run_key"), table_name=CHECKPOINTS)
    op.drop_table(CHECKPOINTS)
