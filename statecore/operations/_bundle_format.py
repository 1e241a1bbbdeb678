"""The portable bundle format: models, consistency rules, and the checksummed file encoding.

A bundle file is canonical JSON (sorted keys, no whitespace, UTF-8)::

    {"content": {"format": "statecore.session", "schema_version": 1, ...},
     "sha256": "<hex digest of the canonical JSON of content>"}

``load_bundle`` refuses anything it cannot restore exactly, with a BundleError that says
which rule failed: not JSON, truncated, another format or schema version, checksum mismatch,
missing fields, or data that contradicts itself (gaps in seqs, token totals that do not add
up).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import Field, JsonValue, ValidationError

from statecore.core._errors import BundleError, InvalidInputError, validation_message
from statecore.core._limits import DEFAULT_SESSION_TTL_SECONDS
from statecore.core._models import (
    FlowCheckpoint,
    KVEntry,
    ScopedState,
    SessionRef,
    StatecoreModel,
    StoredMessage,
    Summary,
    TokenUsage,
)

SESSION_FORMAT: Final = "statecore.session"
NAMESPACE_FORMAT: Final = "statecore.namespace"
#: 2: turn records travel in a section of their own (``turns``); schema 1 carried them as KV
#: entries of the reserved ``turn`` bucket, which an import moves into the record store.
BUNDLE_SCHEMA_VERSION = 2
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1, 2)
#: The KV bucket that held a session's turn records in schema 1 bundles.
TURN_RECORD_BUCKET: Final = "turn"


class SessionHeader(StatecoreModel):
    """The parts of the session header that travel. Creation and access times do not: an
    imported session starts its idle clock at import, so an old backup is not swept at once."""

    system_prompt: str | None = None
    window_start_seq: int = Field(default=1, ge=1)
    ttl_seconds: int = Field(default=DEFAULT_SESSION_TTL_SECONDS, ge=1)


class BundleHint(StatecoreModel):
    """A hint without its id: hint ids are handles local to one database, so a bundle
    carries hints in order and the importing store numbers them itself."""

    text: str
    created_at: datetime


class OrchestrationSnapshot(StatecoreModel):
    """OrchestrationState without the session's idle clock (``last_accessed``, ``ttl``)."""

    active_step: str | None = None
    recently_used_tools: list[str] = Field(default_factory=list)
    sequence_index: int = Field(default=0, ge=0)
    cumulative_token_usage: TokenUsage = Field(default_factory=TokenUsage)


class TurnRecordEntry(StatecoreModel):
    """A committed turn's record (``statecore.operations._turn_record``), as stored: importing it
    keeps a re-sent turn id deduplicated."""

    turn_id: str
    record: JsonValue


class SessionBundle(StatecoreModel):
    """Everything one session owns, restorable verbatim."""

    format: Literal["statecore.session"] = SESSION_FORMAT
    schema_version: int = BUNDLE_SCHEMA_VERSION
    exported_at: datetime
    ref: SessionRef
    session: SessionHeader = Field(default_factory=SessionHeader)
    messages: list[StoredMessage] = Field(default_factory=list)
    hints: list[BundleHint] = Field(default_factory=list)
    summary: Summary | None = None
    #: Session-scope KV entries, the tools (``tool.*``) and task (``task.*``) buckets included.
    kv: list[KVEntry] = Field(default_factory=list)
    #: One record per committed turn, ascending turn id (schema 2; see TURN_RECORD_BUCKET).
    turns: list[TurnRecordEntry] = Field(default_factory=list)
    #: The scoped state of (task_id=session_id, agent_id), if any.
    state: ScopedState | None = None
    #: Every checkpoint of every flow, each flow's versions ascending.
    flows: list[FlowCheckpoint] = Field(default_factory=list)
    orchestration: OrchestrationSnapshot | None = None


class NamespaceBundle(StatecoreModel):
    """A whole namespace: its sessions, its namespace-wide KV and its other scoped states."""

    format: Literal["statecore.namespace"] = NAMESPACE_FORMAT
    schema_version: int = BUNDLE_SCHEMA_VERSION
    exported_at: datetime
    namespace: str
    sessions: list[SessionBundle] = Field(default_factory=list)
    #: KV entries shared by the namespace (scope owner "").
    kv: list[KVEntry] = Field(default_factory=list)
    #: Scoped states of the namespace that belong to none of ``sessions``.
    states: list[ScopedState] = Field(default_factory=list)


Bundle = SessionBundle | NamespaceBundle


# --- consistency ------------------------------------------------------------------------------


def check_schema_version(version: Any) -> None:
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise BundleError(
            f"bundle schema_version {version!r} is not supported; this statecore reads "
            f"schema_version {', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}. Export it again "
            "with a matching statecore or upgrade this one",
            schema_version=version,
        )


def check_session_bundle(bundle: SessionBundle) -> None:
    """Raise BundleError unless the bundle describes a log statecore could have written."""
    check_schema_version(bundle.schema_version)
    where = f"session {bundle.ref}"
    total = 0
    seen_turn_slots: set[tuple[str, int]] = set()
    for position, message in enumerate(bundle.messages, start=1):
        if message.seq != position:
            raise BundleError(
                f"{where}: message seqs must run 1, 2, 3, ... without gaps; found seq "
                f"{message.seq} at position {position}"
            )
        total += message.tokens
        if message.cumulative_tokens != total:
            raise BundleError(
                f"{where}: message seq {message.seq} has cumulative_tokens "
                f"{message.cumulative_tokens} but the tokens so far add up to {total}"
            )
        slot = (message.turn_id, message.index)
        if slot in seen_turn_slots:
            raise BundleError(f"{where}: turn {message.turn_id!r} index {message.index} twice")
        seen_turn_slots.add(slot)
    last_seq = len(bundle.messages)
    if bundle.session.window_start_seq > last_seq + 1:
        raise BundleError(
            f"{where}: window_start_seq {bundle.session.window_start_seq} is past the log's "
            f"end (last seq {last_seq})"
        )
    if bundle.summary is not None and bundle.summary.through_seq > last_seq:
        raise BundleError(
            f"{where}: the summary covers seq {bundle.summary.through_seq} but the log ends at "
            f"{last_seq}"
        )
    if len({(e.bucket, e.key) for e in bundle.kv}) != len(bundle.kv):
        raise BundleError(f"{where}: a KV (bucket, key) appears twice")
    if len({t.turn_id for t in bundle.turns}) != len(bundle.turns):
        raise BundleError(f"{where}: a turn record appears twice")
    versions: dict[str, int] = {}
    for checkpoint in bundle.flows:
        expected = versions.get(checkpoint.flow_id, 0) + 1
        if checkpoint.version != expected:
            raise BundleError(
                f"{where}: flow {checkpoint.flow_id!r} has version {checkpoint.version} where "
                f"{expected} was expected (versions run 1, 2, 3, ... in order)"
            )
        versions[checkpoint.flow_id] = expected
    state = bundle.state
    if state is not None and (state.namespace, state.task_id, state.agent_id) != (
        bundle.ref.namespace,
        bundle.ref.session_id,
        bundle.ref.agent_id,
    ):
        raise BundleError(
            f"{where}: the scoped state belongs to task {state.task_id!r} / agent "
            f"{state.agent_id!r} in namespace {state.namespace!r}, not to this session"
        )


def check_namespace_bundle(bundle: NamespaceBundle) -> None:
    check_schema_version(bundle.schema_version)
    refs = [s.ref for s in bundle.sessions]
    if len(set(refs)) != len(refs):
        raise BundleError(f"namespace {bundle.namespace!r}: a session appears twice")
    for session in bundle.sessions:
        if session.ref.namespace != bundle.namespace:
            raise BundleError(
                f"session {session.ref} is not in the bundle's namespace {bundle.namespace!r}"
            )
        check_session_bundle(session)
    scopes = [(s.task_id, s.agent_id) for s in bundle.states]
    session_scopes = {(r.session_id, r.agent_id) for r in refs}
    if len(set(scopes)) != len(scopes) or session_scopes & set(scopes):
        raise BundleError(f"namespace {bundle.namespace!r}: a scoped state appears twice")
    if any(s.namespace != bundle.namespace for s in bundle.states):
        raise BundleError(f"namespace {bundle.namespace!r}: a scoped state of another namespace")
    if len({(e.bucket, e.key) for e in bundle.kv}) != len(bundle.kv):
        raise BundleError(f"namespace {bundle.namespace!r}: a KV (bucket, key) appears twice")


def check_bundle(bundle: Bundle) -> None:
    if isinstance(bundle, SessionBundle):
        check_session_bundle(bundle)
    else:
        check_namespace_bundle(bundle)


# --- file encoding ----------------------------------------------------------------------------


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8: equal content gives equal bytes."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def dump_bundle(bundle: Bundle) -> bytes:
    """Encode a bundle as a checksummed canonical JSON file."""
    check_bundle(bundle)
    content = bundle.model_dump(mode="json")
    digest = hashlib.sha256(canonical_json(content)).hexdigest()
    return canonical_json({"content": content, "sha256": digest})


def _refuse_constant(name: str) -> Any:
    raise BundleError(f"the bundle file contains {name}, which is not valid JSON")


def _parse(data: bytes) -> Any:
    if not data.strip():
        raise BundleError("the bundle file is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data":
            raise BundleError("the bundle file ends inside a character: it is truncated") from exc
        raise BundleError(f"the bundle file is not UTF-8 text (byte {exc.start})") from exc
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        end = len(text.rstrip())
        if exc.pos >= end or exc.msg.startswith("Unterminated string"):
            raise BundleError(
                f"the bundle file ends early at byte {end} ({exc.msg}): it is truncated; "
                "copy the whole file again"
            ) from exc
        raise BundleError(
            f"the bundle file is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc


def load_bundle(data: bytes) -> Bundle:
    """Decode and verify a file written by ``dump_bundle``; BundleError on any defect."""
    envelope = _parse(data)
    if not isinstance(envelope, dict) or set(envelope) != {"content", "sha256"}:
        raise BundleError(
            "not a statecore bundle file: expected a JSON object with exactly the keys "
            "'content' and 'sha256' (write bundles with dump_bundle / `statecore export`)"
        )
    content = envelope["content"]
    if not isinstance(content, dict):
        raise BundleError("the bundle's content is not a JSON object")
    kind = content.get("format")
    if kind not in (SESSION_FORMAT, NAMESPACE_FORMAT):
        raise BundleError(
            f"bundle format {kind!r} is not one statecore reads; expected "
            f"{SESSION_FORMAT!r} or {NAMESPACE_FORMAT!r}"
        )
    digest = hashlib.sha256(canonical_json(content)).hexdigest()
    if envelope["sha256"] != digest:
        raise BundleError(
            "bundle checksum mismatch: the content was changed or damaged after export "
            f"(file says {str(envelope['sha256'])[:16]}..., content hashes to {digest[:16]}...)"
        )
    check_schema_version(content.get("schema_version"))
    model = SessionBundle if kind == SESSION_FORMAT else NamespaceBundle
    try:
        bundle = model.model_validate(content)
    except ValidationError as exc:
        problems = validation_message(exc, what="(top level)", limit=10)
        raise BundleError(f"bundle fields are missing or invalid: {problems}") from exc
    except InvalidInputError as exc:
        # Model validators raise statecore's own errors (bad identifiers, empty content).
        if isinstance(exc, BundleError):
            raise
        raise BundleError(f"bundle data is invalid: {exc.message}") from exc
    check_bundle(bundle)
    return bundle
