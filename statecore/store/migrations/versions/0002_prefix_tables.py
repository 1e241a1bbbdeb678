"""Prefix every statecore table (and the names derived from it) with ``statecore_``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25

statecore shares its database with the application that uses it, whose own tables may be
called ``sessions`` or ``messages``. PostgreSQL and MariaDB/MySQL rename in place (no data is
copied). SQLite cannot rename a constraint, so each table is rebuilt under its new name and its
rows copied, children after their parent and the old children dropped before the old parent, so
dropping a parent never cascades into rows still in use.

The version table moves too (``alembic_version`` -> ``statecore_alembic_version``); that is the
migration runner's job (``statecore.store.sql._version_table``), done before this revision runs.

Downgrading needs the unprefixed names free, as revision 0001 itself does; when an
application already uses one, the downgrade refuses before changing anything.

Names are written out (not taken from statecore.store.sql._schema) so that this revision keeps
doing the same thing whatever later code changes.
"""

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from statecore.core._errors import MigrationError
from statecore.store.sql._types import (
    UtcDateTime,
    ascii_id,
    big_pk,
    long_text,
    medium_blob,
    medium_text,
)

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PREFIX = "statecore_"
#: Parents before children.
TABLES = (
    "sessions",
    "messages",
    "hints",
    "kv_entries",
    "scoped_states",
    "flow_checkpoints",
    "orchestration_states",
)
#: Tables with a foreign key ``session_pk`` -> ``sessions.id``.
CHILDREN = ("messages", "hints", "flow_checkpoints", "orchestration_states")
#: Tables whose ``id`` is a serial column (PostgreSQL names its sequence after the table).
SERIAL = ("sessions", "hints", "kv_entries", "scoped_states", "flow_checkpoints")
UNIQUE = {
    "sessions": ("namespace", "agent_id", "session_id"),
    "messages": ("session_pk", "turn_id", "idx"),
    "kv_entries": ("namespace", "owner", "bucket", "key"),
    "scoped_states": ("namespace", "task_id", "agent_id"),
    "flow_checkpoints": ("session_pk", "flow_id", "version"),
}
INDEXES = {
    "sessions": ("expires_at",),
    "messages": ("session_pk", "cumulative_tokens"),
    "hints": ("session_pk",),
    "kv_entries": ("expires_at",),
}

ID = 128
OWNER = 257
KEY = 512
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}

Naming = Callable[[str], str]


def _old(table: str) -> str:
    return table


def _new(table: str) -> str:
    return PREFIX + table


def _pk(name: Naming, table: str) -> str:
    return f"pk_{name(table)}"


def _uq(name: Naming, table: str) -> str:
    return f"uq_{name(table)}_{'_'.join(UNIQUE[table])}"


def _ix(name: Naming, table: str) -> str:
    return f"ix_{name(table)}_{'_'.join(INDEXES[table])}"


def _fk(name: Naming, table: str) -> str:
    return f"fk_{name(table)}_session_pk_{name('sessions')}"


def upgrade() -> None:
    _move(_old, _new)


def downgrade() -> None:
    refuse_if_names_taken(set(sa.inspect(op.get_bind()).get_table_names()))
    _move(_new, _old)


def refuse_if_names_taken(existing: set[str]) -> None:
    """Revision 0001's table names may be the application's own: then refuse (the Alembic
    environment calls this before a downgrade's first step too, so nothing is changed)."""
    taken = set(TABLES) & existing
    if taken:
        raise MigrationError(
            "cannot downgrade below revision 0002: revision 0001 names its tables "
            f"{', '.join(TABLES)}, and this database already has {', '.join(sorted(taken))} "
            "(the application's own, most likely); nothing was changed"
        )


def _move(source: Naming, target: Naming) -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        _rename_postgresql(source, target)
    elif dialect in ("mysql", "mariadb"):
        _rename_mysql(source, target)
    elif dialect == "sqlite":
        _rebuild_sqlite(source, target)
    else:
        raise NotImplementedError(f"no migration written for dialect {dialect!r}")


def _rename_postgresql(source: Naming, target: Naming) -> None:
    # Renaming a table keeps its constraints, indexes and sequences under their old names,
    # so each is renamed after it.
    for table in TABLES:
        new = target(table)
        op.rename_table(source(table), new)
        renames = [(_pk(source, table), _pk(target, table))]
        if table in UNIQUE:
            renames.append((_uq(source, table), _uq(target, table)))
        if table in CHILDREN:
            renames.append((_fk(source, table), _fk(target, table)))
        for old_name, new_name in renames:
            op.execute(f'ALTER TABLE "{new}" RENAME CONSTRAINT "{old_name}" TO "{new_name}"')
        if table in INDEXES:
            op.execute(f'ALTER INDEX "{_ix(source, table)}" RENAME TO "{_ix(target, table)}"')
        if table in SERIAL:
            op.execute(
                f'ALTER SEQUENCE "{source(table)}_id_seq" RENAME TO "{target(table)}_id_seq"'
            )


def _rename_mysql(source: Naming, target: Naming) -> None:
    # One RENAME TABLE moves every table at once; foreign keys follow their parent. MySQL
    # cannot rename a foreign key, so each is dropped and added again under its new name.
    op.execute(
        "RENAME TABLE " + ", ".join(f"`{source(t)}` TO `{target(t)}`" for t in TABLES)
    )
    for table in TABLES:
        renames = []
        if table in UNIQUE:
            renames.append((_uq(source, table), _uq(target, table)))
        if table in INDEXES:
            renames.append((_ix(source, table), _ix(target, table)))
        if renames:
            op.execute(
                f"ALTER TABLE `{target(table)}` "
                + ", ".join(f"RENAME INDEX `{old}` TO `{new}`" for old, new in renames)
            )
    # The rows already satisfy the constraint being re-added; with checks on, InnoDB would
    # copy the whole table to verify them again.
    op.execute("SET @statecore_fk_checks = @@SESSION.foreign_key_checks")
    op.execute("SET SESSION foreign_key_checks = 0")
    try:
        for table in CHILDREN:
            op.execute(f"ALTER TABLE `{target(table)}` DROP FOREIGN KEY `{_fk(source, table)}`")
            op.execute(
                f"ALTER TABLE `{target(table)}` ADD CONSTRAINT `{_fk(target, table)}` "
                f"FOREIGN KEY (`session_pk`) REFERENCES `{target('sessions')}` (`id`) "
                "ON DELETE CASCADE"
            )
    finally:
        op.execute("SET SESSION foreign_key_checks = @statecore_fk_checks")


def _rebuild_sqlite(source: Naming, target: Naming) -> None:
    _create_tables(target)
    for table in TABLES:
        op.execute(f'INSERT INTO "{target(table)}" SELECT * FROM "{source(table)}"')
    # AUTOINCREMENT never hands out an id again, even one whose row was deleted: carry the
    # high-water mark over, not just the largest id left.
    op.execute(f"DELETE FROM sqlite_sequence WHERE name = '{target('hints')}'")
    op.execute(
        f"INSERT INTO sqlite_sequence (name, seq) SELECT '{target('hints')}', seq "
        f"FROM sqlite_sequence WHERE name = '{source('hints')}'"
    )
    for table in reversed(TABLES):
        op.drop_table(source(table))


def _session_fk(name: Naming, table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["session_pk"],
        [f"{name('sessions')}.id"],
        name=op.f(_fk(name, table)),
        ondelete="CASCADE",
    )


def _unique(name: Naming, table: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*UNIQUE[table], name=op.f(_uq(name, table)))


def _index(name: Naming, table: str) -> None:
    op.create_index(op.f(_ix(name, table)), name(table), list(INDEXES[table]))


def _create_tables(name: Naming) -> None:
    """The schema of revision 0001 under ``name``'s table names (SQLite's rebuild)."""
    op.create_table(
        name("sessions"),
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
        sa.PrimaryKeyConstraint("id", name=op.f(_pk(name, "sessions"))),
        _unique(name, "sessions"),
        **MYSQL,
    )
    _index(name, "sessions")

    op.create_table(
        name("messages"),
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
        _session_fk(name, "messages"),
        sa.PrimaryKeyConstraint("session_pk", "seq", name=op.f(_pk(name, "messages"))),
        _unique(name, "messages"),
        **MYSQL,
    )
    _index(name, "messages")

    op.create_table(
        name("hints"),
        sa.Column("id", big_pk(), autoincrement=True, nullable=False),
        sa.Column("session_pk", big_pk(), nullable=False),
        sa.Column("text", medium_text(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        _session_fk(name, "hints"),
        sa.PrimaryKeyConstraint("id", name=op.f(_pk(name, "hints"))),
        sqlite_autoincrement=True,
        **MYSQL,
    )
    _index(name, "hints")

    op.create_table(
        name("kv_entries"),
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
        sa.PrimaryKeyConstraint("id", name=op.f(_pk(name, "kv_entries"))),
        _unique(name, "kv_entries"),
        **MYSQL,
    )
    _index(name, "kv_entries")

    op.create_table(
        name("scoped_states"),
        sa.Column("id", big_pk(), autoincrement=True, nullable=False),
        sa.Column("namespace", ascii_id(ID), nullable=False),
        sa.Column("task_id", ascii_id(ID), nullable=False),
        sa.Column("agent_id", ascii_id(ID), nullable=False),
        sa.Column("document", long_text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f(_pk(name, "scoped_states"))),
        _unique(name, "scoped_states"),
        **MYSQL,
    )

    op.create_table(
        name("flow_checkpoints"),
        sa.Column("id", big_pk(), autoincrement=True, nullable=False),
        sa.Column("session_pk", big_pk(), nullable=False),
        sa.Column("flow_id", ascii_id(ID), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("step", ascii_id(ID), nullable=False),
        sa.Column("data", long_text(), nullable=False),
        sa.Column("conversation_seq", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        _session_fk(name, "flow_checkpoints"),
        sa.PrimaryKeyConstraint("id", name=op.f(_pk(name, "flow_checkpoints"))),
        _unique(name, "flow_checkpoints"),
        **MYSQL,
    )

    op.create_table(
        name("orchestration_states"),
        sa.Column("session_pk", big_pk(), autoincrement=False, nullable=False),
        sa.Column("active_step", ascii_id(ID), nullable=True),
        sa.Column("recently_used_tools", medium_text(), nullable=False),
        sa.Column("sequence_index", sa.BigInteger(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        _session_fk(name, "orchestration_states"),
        sa.PrimaryKeyConstraint("session_pk", name=op.f(_pk(name, "orchestration_states"))),
        **MYSQL,
    )
