"""The change feed in memory: one list per namespace, committed with the transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from statecore.core._change_events import ChangeEvent, NewEvent, assign
from statecore.core._models import validate_identifier
from statecore.store._base import EventStore
from statecore.store._inputs import check_int
from statecore.store.memory._context import TxContext


class MemoryEventStore(EventStore):
    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx

    async def append(self, namespace: str, events: Sequence[NewEvent]) -> int:
        validate_identifier(namespace, "namespace")
        if not events:
            return 0
        ws = self._ctx.ws
        last = ws.event_heads.get(namespace) or 0
        recorded = assign(namespace, last + 1, self._ctx.now, events)
        for event in events:
            event.detail_json()  # the same size check as SQL
        feed = ws.events.writable(namespace)
        if feed is None:
            feed = []
            ws.events.put(namespace, feed)
        feed.extend(recorded)
        ws.event_heads.put(namespace, last + len(events))
        return last + 1

    async def read(self, namespace: str, *, after: int = 0, limit: int = 500) -> list[ChangeEvent]:
        validate_identifier(namespace, "namespace")
        check_int(after, "after", minimum=0)
        check_int(limit, "limit", minimum=1, maximum=1000)
        feed = self._ctx.ws.events.get(namespace) or []
        return [e for e in feed if e.seq > after][:limit]

    async def last_seq(self, namespace: str) -> int:
        validate_identifier(namespace, "namespace")
        return self._ctx.ws.event_heads.get(namespace) or 0

    async def sweep(
        self,
        *,
        older_than: datetime | None = None,
        keep_last: int | None = None,
        namespace: str | None = None,
    ) -> int:
        if keep_last is not None:
            check_int(keep_last, "keep_last", minimum=0)
        ws = self._ctx.ws
        names = [namespace] if namespace is not None else [n for n, _ in ws.events.items()]
        removed = 0
        for name in names:
            feed = ws.events.get(name) or []
            head = ws.event_heads.get(name) or 0
            kept = [
                e
                for e in feed
                if (older_than is None or e.created_at >= older_than)
                and (keep_last is None or e.seq > head - keep_last)
            ]
            if len(kept) != len(feed):
                removed += len(feed) - len(kept)
                ws.events.put(name, kept)
        return removed
