"""What each mutating method of the storage contract changed, as change-feed notes.

One rule per method (``statecore.store._change_ledger`` wraps the methods and merges the
notes of one transaction into one event per kind and session). Rules read the call's
arguments and result only: they never query the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pydantic import JsonValue

from statecore.core._change_events import EventKind, json_bytes
from statecore.store._change_ledger import Note, Rule

#: Buckets statecore keeps its own bookkeeping in (turn numbers, share bookkeeping): a write
#: there belongs to a change that its door records, never a change of its own.
_BOOKKEEPING_PREFIXES = ("turn.", "share.")
_BOOKKEEPING_NAMES = ("turn",)
_GRANT_BUCKET = "share.grant"


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
