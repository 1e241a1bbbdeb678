"""Statements over many rows, cut to what one statement may carry."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def chunked(items: Sequence[T], size: int = 500) -> Iterator[Sequence[T]]:
    """``items`` in slices small enough for one statement's bind parameters (PostgreSQL
    and SQLite cap them at 32,767)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
