"""Insert-or-update statements, spelled per dialect.

A plain INSERT that hits a unique key and is then followed by a locking read of that key
deadlocks on InnoDB when two transactions race: each failed insert keeps a shared lock on the
existing row (rolling back to a savepoint does not release it) and both then wait for an
exclusive one. ``ON DUPLICATE KEY UPDATE`` / ``ON CONFLICT`` take the exclusive lock at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.sql.dml import Insert


def is_mysql(dialect_name: str) -> bool:
    return dialect_name in ("mysql", "mariadb")


#: Given the row the INSERT proposed (``excluded`` / ``VALUES()``), the columns to change on
#: the existing row and their new values.
Changes = Callable[[Any], Sequence[tuple[str, Any]]]


def upsert(
    dialect_name: str,
    table: Table,
    values: Mapping[str, Any],
    conflict_columns: Sequence[str],
    changes: Changes,
) -> Insert:
    """INSERT ``values``; if a row with the same ``conflict_columns`` exists, apply
    ``changes`` to it instead. Change expressions may read the existing row (``table.c``)
    and the proposed one. MySQL applies them in order, each seeing the ones before, so list
    columns that read others first."""
    if is_mysql(dialect_name):
        statement: Any = mysql.insert(table).values(dict(values))
        return statement.on_duplicate_key_update(list(changes(statement.inserted)))
    module = postgresql if dialect_name == "postgresql" else sqlite
    statement = module.insert(table).values(dict(values))
    return statement.on_conflict_do_update(
        index_elements=list(conflict_columns), set_=dict(changes(statement.excluded))
    )


def insert_or_ignore(
    dialect_name: str, table: Table, values: Mapping[str, Any], conflict_columns: Sequence[str]
) -> Insert:
    """INSERT ``values`` unless a row with the same ``conflict_columns`` exists, which is
    left as it is (and, on MySQL, locked exclusively)."""
    if is_mysql(dialect_name):
        first = conflict_columns[0]
        return upsert(
            dialect_name, table, values, conflict_columns, lambda _: [(first, table.c[first])]
        )
    module = postgresql if dialect_name == "postgresql" else sqlite
    statement: Any = module.insert(table).values(dict(values))
    return statement.on_conflict_do_nothing(index_elements=list(conflict_columns))
