"""Turn records get a table of their own: ``statecore_turn_records``.

Revision ID: 0006_turn_records
Revises: 0005_shares_and_events
Create Date: 2026-11-25

A committed turn's record (what makes a re-sent turn id answer from storage) was a row of
the KV table in the session's reserved ``turn`` bucket: its namespace, owner, bucket, kind,
revision and three timestamps, and a four-column unique index over them, for about 200
bytes of JSON. The new table is keyed by (session_pk, turn_id) and holds the record's text;
its primary key is its only index and the session's foreign key deletes it with the session.

The upgrade moves every session's ``turn`` rows into the table as they are (readers still
read the object layout those rows hold) and deletes them from the KV table, in one INSERT ...
SELECT and one DELETE on every dialect: one pass over the KV table, each row's session found
through the sessions' unique index. Rows whose owner names no session stay where they are. The downgrade moves the records back into ``turn`` KV rows, rewriting the array layout
this revision introduced into the object layout earlier releases read.

Names are written out (not taken from statecore.store.sql._schema) so that this revision keeps
doing the same thing whatever later code changes.
"""

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from statecore.store.sql._types import UtcDateTime, ascii_id, big_pk, medium_blob, medium_text

revision: str = "0006_turn_records"
down_revision: str | None = "0005_shares_and_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128
OWNER = 257
KEY = 512
TURN_BUCKET = "turn"
TURN_RECORDS = "statecore_turn_records"
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
#: Records written back per statement by the downgrade.
BATCH = 500

sessions = sa.table(
    "statecore_sessions",
    sa.column("id", big_pk()),
    sa.column("namespace", ascii_id(ID)),
    sa.column("agent_id", ascii_id(ID)),
    sa.column("session_id", ascii_id(ID)),
)
kv_entries = sa.table(
    "statecore_kv_entries",
    sa.column("namespace", ascii_id(ID)),
    sa.column("owner", ascii_id(OWNER)),
    sa.column("bucket", ascii_id(ID)),
    sa.column("key", ascii_id(KEY)),
    sa.column("kind", sa.String(8)),
    sa.column("value", medium_blob()),
    sa.column("revision", sa.BigInteger()),
    sa.column("created_at", UtcDateTime()),
    sa.column("updated_at", UtcDateTime()),
    sa.column("expires_at", UtcDateTime()),
)
turn_records = sa.table(
    TURN_RECORDS,
    sa.column("session_pk", big_pk()),
    sa.column("turn_id", ascii_id(ID)),
    sa.column("record", medium_text()),
)


def upgrade() -> None:
    op.create_table(
        TURN_RECORDS,
        sa.Column("session_pk", big_pk(), autoincrement=False, nullable=False),
        sa.Column("turn_id", ascii_id(ID), nullable=False),
        sa.Column("record", medium_text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"],
            ["statecore_sessions.id"],
            name="fk_statecore_turn_records_session_pk_statecore_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_pk", "turn_id", name="pk_statecore_turn_records"),
        **MYSQL,
    )
    _move_kv_rows()


def _session_owner() -> Any:
    # Renders ``agent_id || '/' || session_id`` or, on MariaDB/MySQL, ``concat(...)``.
    return sessions.c.agent_id + "/" + sessions.c.session_id


def _owner_parts(dialect: str) -> tuple[Any, Any]:
    """A session-scope KV owner ('agent_id/session_id') split into its two ids, so the session
    is found through its unique index (namespace, agent_id, session_id), one lookup per row.
    Identifiers never contain '/'."""
    owner = kv_entries.c.owner
    if dialect == "postgresql":
        return sa.func.split_part(owner, "/", 1), sa.func.split_part(owner, "/", 2)
    if dialect in ("mysql", "mariadb"):
        return sa.func.substring_index(owner, "/", 1), sa.func.substring_index(owner, "/", -1)
    slash = sa.func.instr(owner, "/")
    return sa.func.substr(owner, 1, slash - 1), sa.func.substr(owner, slash + 1)


def _kv_rows_of_sessions(dialect: str) -> Any:
    """The ``turn`` rows of the KV table that a session owns, joined to that session."""
    kv = kv_entries.c
    agent_id, session_id = _owner_parts(dialect)
    return sa.and_(
        kv.bucket == TURN_BUCKET,
        kv.kind == "json",
        kv.owner != "",
        sa.func.length(kv.key) <= ID,
        sessions.c.namespace == kv.namespace,
        sessions.c.agent_id == agent_id,
        sessions.c.session_id == session_id,
    )


def _as_text(value: Any, dialect: str) -> Any:
    """A KV value (UTF-8 JSON bytes) as text."""
    if dialect == "postgresql":
        # A cast would give bytea's escaped form ('\x7b...'), not the text.
        return sa.func.convert_from(value, "UTF8")
    return sa.cast(value, sa.Text())


def _move_kv_rows() -> None:
    dialect = op.get_bind().dialect.name
    kv = kv_entries.c
    moved = sa.select(sessions.c.id, kv.key, _as_text(kv.value, dialect)).where(
        _kv_rows_of_sessions(dialect)
    )
    op.execute(turn_records.insert().from_select(["session_pk", "turn_id", "record"], moved))
    owned = sa.exists().where(_kv_rows_of_sessions(dialect))
    op.execute(kv_entries.delete().where(kv.bucket == TURN_BUCKET, owned))


def downgrade() -> None:
    bind = op.get_bind()
    now = datetime.now(UTC)
    rows = sa.select(
        sessions.c.namespace,
        _session_owner().label("owner"),
        turn_records.c.turn_id,
        turn_records.c.record,
    ).select_from(turn_records.join(sessions, sessions.c.id == turn_records.c.session_pk))
    batch: list[dict[str, Any]] = []
    for row in bind.execute(rows):
        value = json.dumps(_object_layout(json.loads(row.record)), separators=(",", ":"))
        batch.append(
            {
                "namespace": row.namespace,
                "owner": row.owner,
                "bucket": TURN_BUCKET,
                "key": row.turn_id,
                "kind": "json",
                "value": value.encode("utf-8"),
                "revision": 1,
                "created_at": now,
                "updated_at": now,
                "expires_at": None,
            }
        )
        if len(batch) == BATCH:
            bind.execute(kv_entries.insert(), batch)
            batch = []
    if batch:
        bind.execute(kv_entries.insert(), batch)
    op.drop_table(TURN_RECORDS)


def _object_layout(value: Any) -> Any:
    """A record of this revision's array layout as the object earlier releases read::

        [turn, last_seq, last_seq - first_seq, token_total, window_tokens,
         [prompt_tokens, completion_tokens, context_tokens, reply], last_seq - message_count,
         state_version]

    with trailing defaults left out; ``reply`` absent means message ``last_seq``, a number
    is the reply's seq, an object the reply itself. Objects are already in that layout."""
    if not isinstance(value, list):
        return value
    items = [*value, *(None, 0, 0, 0, 0, None, 0, None)[len(value) :]]
    turn, last, first_gap, token_total, window_tokens, outcome, count_gap, state_version = items
    data: dict[str, Any] = {
        "turn": turn,
        "first_seq": last - first_gap,
        "last_seq": last,
        "message_count": last - count_gap,
        "token_total": token_total,
        "window_tokens": window_tokens,
    }
    if state_version is not None:
        data["state_version"] = state_version
    if outcome is not None:
        defaults: list[Any] = [0, 0, 0, None]
        prompt, completion, context, reply = list(outcome) + defaults[len(outcome) :]
        result: dict[str, Any] = {
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
            "context_tokens": context,
        }
        if isinstance(reply, dict):
            result["reply"] = reply
        else:
            result["reply_seq"] = last if reply is None else reply
        data["result"] = result
    return data
