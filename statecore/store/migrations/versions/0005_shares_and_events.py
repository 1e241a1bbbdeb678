"""The change feed: ``statecore_events`` and ``statecore_event_heads``.

Revision ID: 0005_shares_and_events
Revises: 0004_langgraph_checkpoints
Create Date: 2026-11-25

Each committed change of a namespace is recorded as a small event (ids and sizes) in the
transaction that commits it; ``event_heads`` holds each namespace's last event number. Share
tokens need no table of their own: their grants live in reserved buckets of the namespace's
KV scope (``statecore.operations._shares``).

Names are written out (not taken from statecore.store.sql._schema) so that this revision keeps
doing the same thing whatever later code changes.
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from statecore.store.sql._types import UtcDateTime, ascii_id, big_pk, medium_text

revision: str = "0005_shares_and_events"
down_revision: str | None = "0004_langgraph_checkpoints"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def upgrade() -> None:
    op.create_table(
        "statecore_events",
        sa.Column("id", big_pk(), autoincrement=True, nullable=False),
        sa.Column("namespace", ascii_id(ID), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("agent_id", ascii_id(ID), nullable=True),
        sa.Column("session_id", ascii_id(ID), nullable=True),
        sa.Column("turn_id", ascii_id(ID), nullable=True),
        sa.Column("detail", medium_text(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_statecore_events"),
        sa.UniqueConstraint(
            "namespace", "seq", name="uq_statecore_events_namespace_seq"
        ),
        **MYSQL,
    )
    op.create_index("ix_statecore_events_created_at", "statecore_events", ["created_at"])
    op.create_table(
        "statecore_event_heads",
        sa.Column("namespace", ascii_id(ID), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("namespace", name="pk_statecore_event_heads"),
        **MYSQL,
    )


def downgrade() -> None:
    op.drop_table("statecore_event_heads")
    op.drop_index("ix_statecore_events_created_at", table_name="statecore_events")
    op.drop_table("statecore_events")
