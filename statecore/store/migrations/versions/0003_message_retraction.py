"""Messages can be retracted: ``retracted_at`` on the message log.

Revision ID: 0003_message_retraction
Revises: 0002
Create Date: 2026-11-25

A framework session's ``pop_item`` takes the newest item back. statecore's rule is that only a
reset destroys, so the row stays (for audit and inspection) and is marked with the time it was
retracted; readers of the conversation skip marked rows. A nullable column: adding it rewrites
no row on any backend, and SQLite can add it in place.

Names are written out (not taken from statecore.store.sql._schema) so that this revision keeps
doing the same thing whatever later code changes.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from statecore.store.sql._types import UtcDateTime

revision: str = "0003_message_retraction"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MESSAGES = "statecore_messages"


def upgrade() -> None:
    op.add_column(MESSAGES, sa.Column("retracted_at", UtcDateTime(), nullable=True))


def downgrade() -> None:
    # A downgrade deletes no message: retracted ones become visible to readers again.
    with op.batch_alter_table(MESSAGES) as batch:
        batch.drop_column("retracted_at")
