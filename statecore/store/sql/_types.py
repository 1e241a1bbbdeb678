"""Column types that behave the same on SQLite, PostgreSQL and MariaDB/MySQL.

Migrations import these, so a change here is a schema change: add new types rather than
editing existing ones.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Integer, LargeBinary, String, Text
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

_MYSQL = ("mysql", "mariadb")


def ascii_id(length: int) -> TypeEngine[str]:
    """An identifier or key column, compared and ordered byte by byte on every dialect.

    Identifiers are ASCII by validation. On MySQL an ``ascii_bin`` column keeps composite
    unique indexes under InnoDB's 3072-byte limit (utf8mb4 would count 4 bytes a character)
    and makes keys case-sensitive; on PostgreSQL the "C" collation gives the same order as
    Python's string comparison, which pagination by ``after`` relies on.
    """
    return (
        String(length)
        .with_variant(mysql.VARCHAR(length, charset="ascii", collation="ascii_bin"), *_MYSQL)
        .with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")
    )


def medium_text() -> TypeEngine[str]:
    """Text up to 16 MiB on MySQL (TEXT stops at 64 KiB; a message may be 512 KiB)."""
    return Text().with_variant(mysql.MEDIUMTEXT(), *_MYSQL)


def long_text() -> TypeEngine[str]:
    """Text up to 4 GiB on MySQL, for JSON documents that may reach the 16 MB state limit."""
    return Text().with_variant(mysql.LONGTEXT(), *_MYSQL)


def medium_blob() -> TypeEngine[bytes]:
    """Bytes up to 16 MiB on MySQL (BLOB stops at 64 KiB; a KV value may be 1 MiB)."""
    return LargeBinary().with_variant(mysql.MEDIUMBLOB(), *_MYSQL)


def long_blob() -> TypeEngine[bytes]:
    """Bytes up to 4 GiB on MySQL (MEDIUMBLOB stops one byte short of 16 MiB, and an
    externally stored payload holding a 16 MiB document is a little larger than that)."""
    return LargeBinary().with_variant(mysql.LONGBLOB(), *_MYSQL)


def big_pk() -> TypeEngine[int]:
    """A surrogate key: BIGINT, except INTEGER on SQLite where only that aliases the rowid."""
    return BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp with microseconds on every dialect.

    PostgreSQL stores ``timestamptz``; SQLite and MySQL store naive UTC (MySQL as
    ``DATETIME(6)``, since plain DATETIME drops microseconds). Values read back are always
    aware UTC; naive values are refused on write so local time can never slip in.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name in _MYSQL:
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column; use an aware datetime")
        value = value.astimezone(UTC)
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
