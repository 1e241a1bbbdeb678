"""The in-memory reference backend of the storage contract."""

from statecore.store.memory._store import MemoryStateStore

__all__ = ["MemoryStateStore"]
