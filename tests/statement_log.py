"""Record the statements a store sends, with their parameters (a listener on its engine:
while one is registered, every statement goes through SQLAlchemy's execution)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from statecore.store.sql import SqlStateStore


class StatementLog:
    """Every statement (and its parameters) the store's engine sends while recording."""

    def __init__(self, store: SqlStateStore) -> None:
        self.statements: list[tuple[str, Any]] = []
        self.recording = False
        event.listen(store.engine.sync_engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if self.recording:
            self.statements.append((statement, params))

    async def during(self, work: Any) -> list[tuple[str, Any]]:
        self.statements, self.recording = [], True
        try:
            await work()
        finally:
            self.recording = False
        return [(s, p) for s, p in self.statements if not s.lstrip().upper().startswith("BEGIN")]
