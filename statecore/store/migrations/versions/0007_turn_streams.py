"""Running turns' streams get a table: ``statecore_turn_streams``.

Revision ID: 0007_turn_streams
Revises: 0006_turn_records
Create Date: 2026-11-28

One row per (session, turn id) while the turn's model call streams its reply: the attempt
that wrote it, the text so far, the tool calls so far. The model call rewrites it and removes
it once the turn commits; the session's foreign key deletes it with the session. Nothing moves
in or out: a database upgraded while no turn runs has no rows to carry.

Names are written out (not taken from statecore.store.sql._schema) so that this revision keeps
doing the same thing whatever later code changes.
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from statecore.store.sql._types import UtcDateTime, ascii_id, big_pk, medium_text

revision: str = "0007_turn_streams"
down_revision: str | None = "0006_turn_records"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128
TURN_STREAMS = "statecore_turn_streams"
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def upgrade() -> None:
    op.create_table(
        TURN_STREAMS,
        sa.Column("session_pk", big_pk(), autoincrement=False, nullable=False),
        sa.Column("turn_id", ascii_id(ID), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("text", medium_text(), nullable=False),
        sa.Column("tool_calls", medium_text(), nullable=False),
        sa.Column("full", sa.Integer(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"],
            ["statecore_sessions.id"],
            name="fk_statecore_turn_streams_session_pk_statecore_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_pk", "turn_id", name="pk_statecore_turn_streams"),
        **MYSQL,
    )


def downgrade() -> None:
    op.drop_table(TURN_STREAMS)
