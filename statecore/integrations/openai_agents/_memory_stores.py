"""One ``memory://`` store per process for ``StatecoreSession``.

A database is shared by everything that opens its URL, and code written for the SDK's
sessions relies on that: its human-in-the-loop scenario builds a second session on the same
database and id to resume a run. ``memory://`` behaves the same way for ``StatecoreSession``:
every session on it in one process reads and writes one store, which lives until the process
ends (``clear_session`` empties one session of it). Sessions counting tokens with different
encodings get one store per encoding, since the store counts what it stores.
"""

from __future__ import annotations

import threading

from statecore.core._tokens import TokenCounter
from statecore.store import MemoryStateStore, StateStore

_lock = threading.Lock()
_stores: dict[str, MemoryStateStore] = {}


def shared_memory_store(counter: TokenCounter) -> StateStore:
    """The process's memory store for sessions counting tokens like ``counter``."""
    with _lock:
        store = _stores.get(counter.encoding_name)
        if store is None:
            store = MemoryStateStore(token_counter=counter)
            _stores[counter.encoding_name] = store
        return store
