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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pydantic import JsonValue

from statecore.core.change_events import EventKind, NewEvent, json_bytes

#: The most entries a list in an event's detail keeps (the rest is counted, not listed).
MAX_LISTED = 20
#: Buckets statecore keeps its own bookkeeping in (turn numbers, share bookkeeping): a write
#: there belongs to a change that its door records, never a change of its own.
_BOOKKEEPING_PREFIXES = ("turn.", "share.")
_BOOKKEEPING_NAMES = ("turn",)
_GRANT_BUCKET = "share.grant"


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
    #: Calls in progress: a mutating method that calls another notes only once, outermost.
    depth: int = 0

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
        if ledger is None or ledger.depth:
            return await fn(self, *args, **kwargs)
        ledger.depth += 1
        try:
            result = await fn(self, *args, **kwargs)
        finally:
            ledger.depth -= 1
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


# --- what each call changed ------------------------------------------------------------------


def _session(kind: EventKind, detail: dict[str, JsonValue], turn_id: str | None = None) -> Rule:
    def rule(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
        ref = a["ref"]
        return [Note(kind, ref.namespace, ref.agent_id, ref.session_id, dict(detail), turn_id)]

    return rule


def _when(pred: Callable[[Any], bool], rule: Rule) -> Rule:
    """``rule`` only when the call's result says it changed something."""

    def when(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
        return rule(a, result, now) if pred(result) else []

    return when


def _appended(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    # An append returns the turn's messages stored earlier in their place (idempotence):
    # the ones this transaction stored carry its time.
    new = [m for m in result if m.created_at == now]
    if not new:
        return []
    ref = a["ref"]
    detail: dict[str, JsonValue] = {
        "first_seq": new[0].seq,
        "last_seq": new[-1].seq,
        "count": len(new),
        "tokens": sum(m.tokens for m in new),
        "bytes": sum(len(m.content.encode("utf-8")) for m in new),
    }
    return [Note("messages", ref.namespace, ref.agent_id, ref.session_id, detail, a["turn_id"])]


def _retracted(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    if result is None:
        return []
    ref = a["ref"]
    return [
        Note("messages", ref.namespace, ref.agent_id, ref.session_id, {"retracted": [result.seq]})
    ]


def _ref_detail(kind: EventKind, make: Callable[[Mapping[str, Any], Any], dict[str, Any]]) -> Rule:
    def rule(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
        ref = a["ref"]
        return [Note(kind, ref.namespace, ref.agent_id, ref.session_id, make(a, result))]

    return rule


def _is_bookkeeping(bucket: str) -> bool:
    return bucket in _BOOKKEEPING_NAMES or bucket.startswith(_BOOKKEEPING_PREFIXES)


def _scope_ids(scope: Any) -> tuple[str | None, str | None]:
    if not scope.owner:
        return None, None
    agent_id, session_id = scope.owner.split("/")
    return agent_id, session_id


def _kv_write(op: str) -> Rule:
    def rule(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
        scope, bucket, key = a["scope"], a["bucket"], a["key"]
        if bucket == _GRANT_BUCKET and op == "put":
            return _grant_note(scope.namespace, a["value"])
        if _is_bookkeeping(bucket) or result is False:
            return []
        write: dict[str, JsonValue] = {"op": op, "bucket": bucket, "key": key}
        if op == "put":
            write["bytes"] = json_bytes(a["value"])
        agent_id, session_id = _scope_ids(scope)
        return [Note("kv", scope.namespace, agent_id, session_id, {"writes": [write], "count": 1})]

    return rule


def _grant_note(namespace: str, grant: Any) -> list[Note]:
    """A grant saved outside a turn (an operator's revocation): a ``share`` event of the
    grant's owner, as a revocation in the owner's turn records."""
    share_id = str(grant["share_id"])
    detail: dict[str, JsonValue]
    if grant.get("revoked_at"):
        detail = {"granted": [], "revoked": [share_id], "wrote": []}
    else:
        entry = {"share_id": share_id, "kind": grant["kind"], "access": grant["access"]}
        detail = {"granted": [entry], "revoked": [], "wrote": []}
    return [Note("share", namespace, grant["owner_agent"], grant["owner_session"], detail)]


def _kv_cleared(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    scope, prefix = a["scope"], a["bucket_prefix"]
    if not result or _is_bookkeeping(prefix):
        return []
    agent_id, session_id = _scope_ids(scope)
    detail: dict[str, JsonValue] = {"cleared": result, "bucket_prefix": prefix}
    return [Note("kv", scope.namespace, agent_id, session_id, detail)]


def _kv_restored(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    scope, entries = a["scope"], a["entries"]
    if not entries:
        return []
    agent_id, session_id = _scope_ids(scope)
    return [Note("import", scope.namespace, agent_id, session_id, {"kv": len(entries)})]


def _state_written(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    detail: dict[str, JsonValue] = {
        "task_id": result.task_id,
        "version": result.version,
        "bytes": json_bytes(result.state),
    }
    return [Note("state", result.namespace, result.agent_id, result.task_id, detail)]


def _state_deleted(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    if not result:
        return []
    task_id = a["task_id"]
    detail: dict[str, JsonValue] = {"task_id": task_id, "deleted": True}
    return [Note("state", a["namespace"], a["agent_id"], task_id, detail)]


def _states_restored(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    return [Note("import", s.namespace, s.agent_id, s.task_id, {"states": 1}) for s in a["states"]]


def _flow_saved(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    ref = a["ref"]
    detail: dict[str, JsonValue] = {
        "checkpoints": [{"flow_id": result.flow_id, "step": result.step}],
        "count": 1,
    }
    return [Note("flow", ref.namespace, ref.agent_id, ref.session_id, detail)]


def _cleared(store: str) -> Rule:
    return _when(bool, _ref_detail("reset", lambda a, n: {"stores": {store: int(n)}}))


def _restored(what: str) -> Rule:
    return _ref_detail("import", lambda a, r: {"restored": [what]})


def _orchestration(detail: Callable[[Mapping[str, Any]], dict[str, Any]]) -> Rule:
    return _ref_detail("orchestration", lambda a, r: detail(a))


def _namespace_deleted(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    detail: dict[str, JsonValue] = {"all": True, "sessions": result}
    return [Note("reset", a["namespace"], None, None, detail)]


def _nothing(a: Mapping[str, Any], result: Any, now: datetime) -> list[Note]:
    return []


SESSIONS: dict[str, Rule | None] = {
    # Creating or touching a session changes no content: its first change is recorded.
    "delete": _when(bool, _session("reset", {"deleted": True})),
    "delete_namespace": _namespace_deleted,
}
CONVERSATION: dict[str, Rule | None] = {
    "append": _appended,
    "retract_last": _retracted,
    "set_system_prompt": _ref_detail(
        "messages", lambda a, r: {"system_prompt_bytes": len((a["text"] or "").encode("utf-8"))}
    ),
    "add_hint": _ref_detail("hint", lambda a, hint: {"id": hint.id}),
    "remove_hint": _when(bool, _ref_detail("hint", lambda a, r: {"removed": a["hint_id"]})),
    "set_summary": _ref_detail("compaction", lambda a, s: {"summary_through_seq": s.through_seq}),
    "set_window_start": _ref_detail("compaction", lambda a, r: {"window_start": a["seq"]}),
    "clear": _ref_detail("reset", lambda a, n: {"stores": {"conversation": int(n)}}),
    "restore": _restored("conversation"),
}
KV: dict[str, Rule | None] = {
    "put": _kv_write("put"),
    "delete": _kv_write("delete"),
    "clear": _kv_cleared,
    "restore": _kv_restored,
    # Expired keys are absent to every read from their expiry on; deleting them changes
    # nothing a reader can see.
    "sweep_expired": _nothing,
}
TURNS: dict[str, Rule | None] = {
    # A turn record is the bookkeeping of a turn's commit, recorded with the turn.
    "insert": _nothing,
    "restore": _nothing,
    "clear": _nothing,
}
STATE: dict[str, Rule | None] = {
    "create": _state_written,
    "update": _state_written,
    "delete": _state_deleted,
    "restore": _states_restored,
}
FLOW: dict[str, Rule | None] = {
    "save": _flow_saved,
    "restore": _restored("flow"),
    "clear": _cleared("flow"),
}
ORCHESTRATION: dict[str, Rule | None] = {
    "update": _orchestration(lambda a: {"updated": True}),
    "set_active_step": _orchestration(lambda a: {"step": a["step"]}),
    "add_used_tool": _orchestration(lambda a: {"tools": 1}),
    "advance_sequence": _orchestration(lambda a: {"advanced": True}),
    "add_token_usage": _orchestration(
        lambda a: {"tokens": int(a["prompt_tokens"]) + int(a["completion_tokens"])}
    ),
    "count_token_usage": _orchestration(
        lambda a: {"tokens": int(a["prompt_tokens"]) + int(a["completion_tokens"])}
    ),
    "reset": _cleared("orchestration"),
    "restore": _restored("orchestration"),
}
#: Explicit events describe the transaction's changes so far (None: claim the notes).
EVENTS: dict[str, Rule | None] = {"append": None}
TRANSACTION: dict[str, Rule | None] = {"finish_turn": None}
