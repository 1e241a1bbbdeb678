"""How LangGraph's names become row keys.

A thread, namespace, channel, task or run may be named by any string LangGraph allows: long,
non-ASCII, empty, with NUL characters. Rows are keyed by the SHA-256 of the name's UTF-8 form,
a fixed 64 ASCII characters that every dialect can index; the name itself is stored as bytes
beside the key. Checkpoint ids and channel versions are ordered, so they are kept as they are
and only checked.
"""

from __future__ import annotations

import hashlib
from typing import Any

from statecore.core._errors import InvalidInputError
from statecore.store.sql._schema import GRAPH_ID_LENGTH


def name_bytes(name: str, what: str) -> bytes:
    """The UTF-8 bytes of ``name``; InvalidInputError when it is no string or not encodable."""
    if not isinstance(name, str):
        raise InvalidInputError(f"{what} must be a string, got {type(name).__name__}")
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{what} is not valid Unicode (a lone surrogate?): {exc}") from exc


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def name_key(name: str, what: str) -> str:
    """The row key of a name: the hex SHA-256 of its UTF-8 bytes."""
    return digest(name_bytes(name, what))


def thread_name(value: Any) -> str:
    """LangGraph accepts any thread id that prints (UUIDs, numbers); like its own savers,
    statecore stores its ``str``."""
    if value is None:
        raise InvalidInputError(
            'the config names no thread: pass {"configurable": {"thread_id": ...}}'
        )
    return value if isinstance(value, str) else str(value)


def ordered_id(value: Any, what: str) -> str:
    """A checkpoint id or channel version as stored: printable ASCII, at most
    GRAPH_ID_LENGTH characters, so it sorts byte by byte on every dialect."""
    text = value if isinstance(value, str) else str(value)
    if not text or len(text) > GRAPH_ID_LENGTH or not (text.isascii() and text.isprintable()):
        raise InvalidInputError(
            f"{what} {text[:80]!r} must be 1 to {GRAPH_ID_LENGTH} printable ASCII characters "
            "(LangGraph's own ids and versions are)"
        )
    return text
