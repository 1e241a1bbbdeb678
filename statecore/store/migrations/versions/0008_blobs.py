"""Payloads stored by reference: ``statecore_blobs`` and ``statecore_blob_refs``.

Revision ID: 0008_blobs
Revises: 0007_turn_streams
Create Date: 2026-11-28

Temporal's external storage keeps a claim in history and the payload elsewhere; statecore's
storage driver (statecore.temporal._blob_driver) keeps it here. A blob is keyed by the
SHA-256 of the payload's bytes (written once, deduplicated); each workflow it was stored for
is a row of ``blob_refs``, which the sweep reads to know when no history can reference the
blob any more. The reference's foreign key has no ON DELETE action: deleting a blob that has
references fails, so a reference written while the sweep runs keeps its blob.

The same revision widens ``statecore_kv_entries.value`` to LONGBLOB on MariaDB/MySQL: a KV
value may now be 16 MiB (MAX_KV_VALUE_BYTES), one byte more than MEDIUMBLOB holds. Other
databases' column already holds it; nothing changes there.

Names are written out (not taken from statecore.store.sql._schema) so that this revision keeps
doing the same thing whatever later code changes.
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from statecore.store.sql._types import UtcDateTime, ascii_id, long_blob, medium_blob

revision: str = "0008_blobs"
down_revision: str | None = "0007_turn_streams"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DIGEST = 64
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def upgrade() -> None:
    op.create_table(
        "statecore_blobs",
        sa.Column("digest", ascii_id(DIGEST), nullable=False),
        sa.Column("encoding", sa.String(length=8), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("stored_size", sa.BigInteger(), nullable=False),
        sa.Column("data", long_blob(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name="pk_statecore_blobs"),
        **MYSQL,
    )
    op.create_table(
        "statecore_blob_refs",
        sa.Column("digest", ascii_id(DIGEST), nullable=False),
        sa.Column("target_key", ascii_id(DIGEST), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("target_id", sa.String(length=1000), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("first_stored_at", UtcDateTime(), nullable=False),
        sa.Column("last_stored_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["digest"],
            ["statecore_blobs.digest"],
            name="fk_statecore_blob_refs_digest_statecore_blobs",
        ),
        sa.PrimaryKeyConstraint("digest", "target_key", name="pk_statecore_blob_refs"),
        **MYSQL,
    )
    op.create_index(
        "ix_statecore_blob_refs_target_key", "statecore_blob_refs", ["target_key"], unique=False
    )
    if _is_mysql():
        op.alter_column(
            "statecore_kv_entries",
            "value",
            existing_type=medium_blob(),
            type_=long_blob(),
            existing_nullable=False,
        )


def _is_mysql() -> bool:
    return op.get_bind().dialect.name in ("mysql", "mariadb")


def downgrade() -> None:
    if _is_mysql():
        # Values over MEDIUMBLOB's 16,777,215 bytes make this fail (strict mode) rather
        # than be cut short.
        op.alter_column(
            "statecore_kv_entries",
            "value",
            existing_type=long_blob(),
            type_=medium_blob(),
            existing_nullable=False,
        )
    op.drop_index("ix_statecore_blob_refs_target_key", table_name="statecore_blob_refs")
    op.drop_table("statecore_blob_refs")
    op.drop_table("statecore_blobs")
