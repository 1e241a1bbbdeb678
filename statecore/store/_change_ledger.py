"""Every committed change reaches the change feed, whichever door it came through.

The storage modules' mutating methods (``kv.put``, ``conversation.append``, ``state.update``,
...) are wrapped once, where the storage contract declares them (``RecordsChanges``): each
successful call is noted in its transaction's ``ChangeLedger``. Just before the transaction
commits, the store turns the notes that nothing has described yet into events
(``describe``) and appends them in the same transaction. So a change made through the store
API, a framework store used on its own, the CLI or any other door is recorded exactly when
it commits, and a refused call (it raised) notes nothing.

Code that records its own events describes everything it changed before them: an explicit
``events.append`` or ``finish_turn`` (a turn's commit, a reset, an import, a compaction,
the TTL sweep, a hint) claims the notes taken so far, so nothing is recorded twice.

Notes are cheap (a tuple per call) and read only when a transaction commits unclaimed
changes: a turn's commit claims its own, so it pays for no more than the tuples.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pydantic import JsonValue

from statecore.core._change_events import EventKind, NewEvent

#: The most entries a list in an event's detail keeps (the rest is counted, not listed).
MAX_LISTED = 20
#: The ledger whose noted call this task is inside: a mutating method that calls another
#: notes once, outermost. Per task, so calls made concurrently on one transaction
#: (``asyncio.gather``) are each noted.
_inside: ContextVar[ChangeLedger | None] = ContextVar("statecore_noted_call", default=None)


@dataclass
class Note:
    """One part of a change: merged with the transaction's other notes of the same kind and
    session into one event."""

    kind: EventKind
    namespace: str
    agent_id: str | None
    session_id: str | None
    detail: dict[str, JsonValue]
    turn_id: str | None = None


#: A rule turns one successful call (its bound arguments, its result, the transaction's
#: time) into the notes of what it changed.
Rule = Callable[[Mapping[str, Any], Any, datetime], list[Note]]


@dataclass
class ChangeLedger:
    """The changes one transaction made that no event describes yet."""

    noted: list[tuple[inspect.Signature, Rule, tuple[Any, ...], dict[str, Any], Any]] = field(
        default_factory=list
    )

    def claim(self) -> None:
        """The caller recorded events describing everything noted so far."""
        self.noted.clear()

    def describe(self, now: datetime) -> dict[str, list[NewEvent]]:
        """The events of the unclaimed notes, per namespace (and forget the notes)."""
        notes: list[Note] = []
        for sig, rule, args, kwargs, result in self.noted:
            bound = sig.bind(None, *args, **kwargs)
            bound.apply_defaults()
            notes.extend(rule(bound.arguments, result, now))
        self.noted.clear()
        return _merged(notes)


def _merged(notes: Sequence[Note]) -> dict[str, list[NewEvent]]:
    groups: dict[tuple[str, EventKind, str | None, str | None], list[Note]] = {}
    for note in notes:
        key = (note.namespace, note.kind, note.agent_id, note.session_id)
        groups.setdefault(key, []).append(note)
    out: dict[str, list[NewEvent]] = {}
    for (namespace, kind, agent_id, session_id), group in groups.items():
        detail: dict[str, JsonValue] = {}
        for note in group:
            _merge_detail(kind, detail, note.detail)
        turn_ids = {n.turn_id for n in group}
        event = NewEvent.model_construct(
            kind=kind,
            agent_id=agent_id,
            session_id=session_id,
            turn_id=turn_ids.pop() if len(turn_ids) == 1 else None,
            detail=detail,
        )
        out.setdefault(namespace, []).append(event)
    return out


_SUMMED = {"count", "tokens", "tools", "cleared", "removed"}
_LOWEST = {"first_seq"}
_HIGHEST = {"last_seq"}


def _merge_detail(kind: str, into: dict[str, JsonValue], part: Mapping[str, JsonValue]) -> None:
    for key, value in part.items():
        old = into.get(key)
        if old is None:
            into[key] = value
        elif isinstance(old, list) and isinstance(value, list):
            into[key] = (old + value)[:MAX_LISTED]
        elif isinstance(old, dict) and isinstance(value, dict):
            into[key] = {**old, **value}
        elif isinstance(old, int) and isinstance(value, int):
            if key in _LOWEST:
                into[key] = min(old, value)
            elif key in _HIGHEST:
                into[key] = max(old, value)
            elif key in _SUMMED or (key == "bytes" and kind == "messages"):
                into[key] = old + value
            else:
                into[key] = value
        else:
            into[key] = value


class RecordsChanges:
    """Mixin of the storage contract's modules: the methods named in ``changes`` (a class
    keyword of the contract's class) are wrapped in every backend's subclass, so that each
    successful call is noted in the transaction's ledger (``_ledger``, set when the
    transaction is opened; None outside one, which notes nothing)."""

    _ledger: ChangeLedger | None = None
    _change_rules: ClassVar[dict[str, tuple[inspect.Signature, Rule | None]]] = {}

    def __init_subclass__(cls, changes: Mapping[str, Rule | None] | None = None, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if changes is not None:
            cls._change_rules = {
                name: (inspect.signature(getattr(cls, name)), rule)
                for name, rule in changes.items()
            }
        for name, (sig, rule) in cls._change_rules.items():
            # Resolved, not looked up in the class's own namespace: a backend may take a
            # method from a mixin of its own.
            fn = getattr(cls, name, None)
            if fn is None or getattr(fn, "__isabstractmethod__", False):
                continue
            if getattr(fn, "_statecore_noted", False):
                continue
            setattr(cls, name, _noting(fn, sig, rule))


def _noting(fn: Any, sig: inspect.Signature, rule: Rule | None) -> Any:
    """``fn`` noting its successful outermost calls; a None ``rule`` claims instead (the
    method records events itself)."""

    @functools.wraps(fn)
    async def noted(self: Any, *args: Any, **kwargs: Any) -> Any:
        ledger: ChangeLedger | None = self._ledger
        if ledger is None or _inside.get() is ledger:
            return await fn(self, *args, **kwargs)
        token = _inside.set(ledger)
        try:
            result = await fn(self, *args, **kwargs)
        finally:
            _inside.reset(token)
        if rule is None:
            ledger.claim()
        else:
            ledger.noted.append((sig, rule, args, kwargs, result))
        return result

    noted._statecore_noted = True  # type: ignore[attr-defined]
    return noted


def attach(ledger: ChangeLedger, modules: Sequence[object]) -> None:
    """Bind the modules of one transaction to its ledger."""
    for module in modules:
        module._ledger = ledger  # type: ignore[attr-defined]
