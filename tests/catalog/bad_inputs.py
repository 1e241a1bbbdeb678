"""The bad-input catalog: every kind of bad input statecore's entry points refuse, as data.

Each entry names the entry point, the input (in words, for docs/bad-input.md), the error
code a caller gets (``statecore.errors``), what the caller should do, and how to apply it
(one of the ``apply`` types below). ``test_bad_input_catalog.py`` applies every entry to a
live session and checks the three promises: a typed error, a session that keeps working,
and stored rows left exactly as they were. ``python -m tests.catalog.render`` writes the
docs table from the same list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from statecore.models import MAX_MESSAGE_BYTES, MAX_STATE_BYTES

MIB = 1024 * 1024


# --- how an entry is applied ------------------------------------------------------------------


@dataclass(frozen=True)
class Update:
    """``handle.execute_update(name, ...)`` on the session's workflow with these raw payloads
    (JSON text, sent byte for byte; ``()`` sends no input)."""

    name: str
    inputs: tuple[str, ...]
    encoding: str = "json/plain"


@dataclass(frozen=True)
class Signal:
    """``temporal workflow signal --name NAME --input-file ...`` (one file per input)."""

    name: str
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class Query:
    """``temporal workflow query --name describe --input-file ...``."""

    inputs: tuple[str, ...]


@dataclass(frozen=True)
class ClientCall:
    """An AgentSessionClient method; ``agent_id``/``session_id`` default to the session's.
    ``method="__init__"`` builds a client with these keyword arguments instead."""

    method: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BundleImport:
    """Export the session, apply ``defect`` (a name in ``appliers.BUNDLE_DEFECTS``) to the
    file, and import it over the session (``replace=True`` unless said)."""

    defect: str
    replace: bool = True


@dataclass(frozen=True)
class TurnApi:
    """One turn of CatalogAgent, a user's workflow on the turn API (``TurnRequest`` fields).
    With ``concurrent_state_write`` another turn writes the state between this turn's read
    and its commit."""

    request: Mapping[str, Any]
    concurrent_state_write: bool = False


Apply = Update | Signal | Query | ClientCall | BundleImport | TurnApi


@dataclass(frozen=True)
class Entry:
    id: str
    entry_point: str
    input: str
    code: str
    apply: Apply
    action: str = ""

    @property
    def what_to_do(self) -> str:
        return self.action or ACTIONS[self.code]


@dataclass(frozen=True)
class Reference:
    """Bad input covered by another suite (the catalog does not repeat it)."""

    entry_point: str
    covered_by: str
    what: str


ACTIONS = {
    "InvalidInput": "Fix the request: one JSON object with the documented fields and types.",
    "InvalidIdentifier": (
        "Use letters, digits and `_ . - @` (keys also `: = +`), start with a letter or digit,"
        " no `..`, at most 128 characters (keys 512)."
    ),
    "ContentTooLarge": "Send less; keep large documents in KV or scoped state, send a reference.",
    "EmptyContent": "Send some text.",
    "UnknownStore": "Name stores among conversation, kv, state, flow, orchestration, tools, task.",
    "StateTooLarge": "Keep the document under 16 MB; keep large data elsewhere by reference.",
    "InvalidBundle": "Export the session again and copy the whole file; do not edit bundles.",
    "AlreadyExists": "Import with `replace=True` (or `--replace`), or into another session id.",
    "VersionConflict": "Re-read the state and apply the change again (optimistic concurrency).",
    "SessionNotFound": "Check the ids, or send a message: that opens the session.",
}


UTF8 = "Send valid UTF-8 text; a lone surrogate (`\\ud800` to `\\udfff`) is never text."
NESTING = "Flatten the data: JSON nested more than a couple of hundred levels is refused."
ONE_INPUT = "Send exactly one JSON object (one `--input`)."
NUL = "Strip NUL characters (U+0000): no backend can store them."
NOT_AN_OBJECT = "Send one JSON object (`json/plain`), not a bare value, bytes or nothing."


def _j(value: Any) -> str:
    return json.dumps(value)


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# --- the entries ------------------------------------------------------------------------------

SEND = "`send_message` update"
TURN_API = "turn API in a user workflow"
BUNDLE = "bundle import"

ENTRIES: list[Entry] = []


def _add(*entries: Entry) -> None:
    ENTRIES.extend(entries)


def _send(id: str, input: str, payload: str, code: str, **kw: Any) -> Entry:
    return Entry(id, SEND, input, code, Update("send_message", (payload,)), **kw)


_add(
    _send("send-array", "a JSON array instead of an object", "[1, 2]", "InvalidInput"),
    _send("send-null", "`null` (no turn_id)", "null", "InvalidInput"),
    _send("send-number", "a number", "42", "InvalidInput"),
    _send(
        "send-content-number",
        "`content` is a number",
        _j({"turn_id": "x", "content": 7}),
        "InvalidInput",
    ),
    _send(
        "send-lone-surrogate",
        "content with a lone surrogate escape `\\ud800`",
        '{"turn_id": "x", "content": "a\\ud800"}',
        "InvalidInput",
    ),
    _send(
        "send-deep-nesting",
        "metadata nested 5,000 arrays deep",
        '{"turn_id": "x", "content": "hi", "metadata": {"a": ' + _deep(5000) + "}}",
        "InvalidInput",
    ),
    Entry(
        "send-two-inputs",
        SEND,
        "two JSON objects as two inputs",
        "InvalidInput",
        Update(
            "send_message",
            (_j({"turn_id": "x", "content": "a"}), _j({"turn_id": "y", "content": "b"})),
        ),
    ),
    Entry("send-no-input", SEND, "no input at all", "InvalidInput", Update("send_message", ())),
    _send("send-not-json", "bytes that are not JSON (`{not json`)", "{not json", "InvalidInput"),
    Entry(
        "send-binary",
        SEND,
        "a `binary/plain` payload",
        "InvalidInput",
        Update("send_message", ("\x00\x01",), encoding="binary/plain"),
    ),
    _send(
        "send-content-over-limit",
        f"content of {MAX_MESSAGE_BYTES + 1:,} bytes (limit 512 KiB)",
        _j({"turn_id": "x", "content": "x" * (MAX_MESSAGE_BYTES + 1)}),
        "ContentTooLarge",
    ),
    _send(
        "send-escaped-content-over-limit",
        "120,000 control characters: 120 KB of text, 720 KB as escaped JSON",
        _j({"turn_id": "x", "content": "\x01" * 120_000}),
        "ContentTooLarge",
    ),
    _send(
        "send-oversized-metadata",
        "1.5 MB of metadata next to a short content",
        _j({"turn_id": "x", "content": "hi", "metadata": {"blob": "m" * 1_500_000}}),
        "ContentTooLarge",
    ),
    _send(
        "send-name-nul",
        "`name` with a NUL character",
        _j({"turn_id": "x", "content": "hi", "name": "a\x00b"}),
        "InvalidInput",
    ),
    _send(
        "send-name-too-long",
        "`name` of 300 characters",
        _j({"turn_id": "x", "content": "hi", "name": "n" * 300}),
        "InvalidInput",
    ),
    _send(
        "send-metadata-nul",
        "metadata holding a NUL character",
        _j({"turn_id": "x", "content": "hi", "metadata": {"k": "a\x00"}}),
        "InvalidInput",
    ),
    _send(
        "send-turn-id-sql",
        "turn_id with SQL metacharacters (`t';DROP TABLE messages;--`)",
        _j({"turn_id": "t';DROP TABLE messages;--", "content": "hi"}),
        "InvalidIdentifier",
    ),
    _send(
        "send-turn-id-too-long",
        "turn_id of 600 characters",
        _j({"turn_id": "t" * 600, "content": "hi"}),
        "InvalidIdentifier",
    ),
    _send(
        "send-role-assistant",
        "`role: assistant` (a turn starts with a user or system message)",
        _j({"turn_id": "x", "content": "hi", "role": "assistant"}),
        "InvalidInput",
    ),
    _send(
        "send-blank-content",
        "content of only whitespace",
        _j({"turn_id": "x", "content": " \n\t"}),
        "EmptyContent",
    ),
)


def _signal(
    name: str, id: str, input: str, payloads: tuple[str, ...], code: str, **kw: Any
) -> Entry:
    return Entry(id, f"`{name}` signal (temporal CLI)", input, code, Signal(name, payloads), **kw)


_add(
    _signal(
        "pause",
        "pause-reason-1mib",
        "a 1 MiB reason (limit 1,000 characters)",
        (_j({"reason": "r" * MIB}),),
        "InvalidInput",
    ),
    _signal(
        "pause",
        "pause-lone-surrogate",
        "reason `\\udfff` (a lone surrogate)",
        ('{"reason": "\\udfff"}',),
        "InvalidInput",
    ),
    _signal("pause", "pause-array", "an empty array", ("[]",), "InvalidInput"),
    _signal(
        "pause",
        "pause-unknown-field",
        "an unknown field (`until`)",
        (_j({"reason": "x", "until": "5pm"}),),
        "InvalidInput",
    ),
    _signal("resume", "resume-string", 'a JSON string (`"now"`)', ('"now"',), "InvalidInput"),
    _signal(
        "resume",
        "resume-two-inputs",
        "two inputs (`--input {} --input {}`)",
        ("{}", "{}"),
        "InvalidInput",
    ),
    _signal(
        "reset", "reset-store-null", "`stores: [null]`", (_j({"stores": [None]}),), "InvalidInput"
    ),
    _signal(
        "reset",
        "reset-unknown-store",
        "`stores` naming an unknown store",
        (_j({"stores": ["conversation", "everything"]}),),
        "UnknownStore",
    ),
    _signal("reset", "reset-number", "a number", ("0",), "InvalidInput"),
    _signal(
        "compact",
        "compact-max-tokens-huge",
        "`max_tokens: 1e30`",
        ('{"max_tokens": 1e30}',),
        "InvalidInput",
    ),
    _signal(
        "compact",
        "compact-strategy-null",
        "`strategy: null`",
        (_j({"strategy": None}),),
        "InvalidInput",
    ),
    _signal(
        "compact",
        "compact-max-messages-zero",
        "`max_messages: 0`",
        (_j({"max_messages": 0}),),
        "InvalidInput",
    ),
    _signal(
        "add_hint",
        "hint-1mib",
        "a 1 MiB hint",
        (_j({"text": "h" * MIB}),),
        "ContentTooLarge",
        action="Keep hints short (at most 4,000 characters).",
    ),
    _signal(
        "add_hint",
        "hint-5000-chars",
        "a hint of 5,000 characters (limit 4,000)",
        (_j({"text": "h" * 5000}),),
        "InvalidInput",
    ),
    _signal("add_hint", "hint-null", "`null` (no text)", ("null",), "InvalidInput"),
    _signal(
        "add_hint",
        "hint-deep-nesting",
        "`text` nested 5,000 arrays deep",
        ('{"text": ' + _deep(5000) + "}",),
        "InvalidInput",
    ),
    _signal(
        "add_hint",
        "hint-nul",
        "text with a NUL character",
        (_j({"text": "a\x00b"}),),
        "InvalidInput",
    ),
    _signal(
        "add_hint",
        "hint-lone-surrogate",
        "text `\\ud800` (a lone surrogate)",
        ('{"text": "\\ud800"}',),
        "InvalidInput",
    ),
    _signal(
        "migrate", "migrate-number", "`task_queue: 5`", (_j({"task_queue": 5}),), "InvalidInput"
    ),
    _signal(
        "migrate",
        "migrate-space",
        "`task_queue` with a space",
        (_j({"task_queue": "queue two"}),),
        "InvalidIdentifier",
    ),
    _signal(
        "close",
        "close-delete-state-array",
        "`delete_state: [true]`",
        (_j({"delete_state": [True]}),),
        "InvalidInput",
    ),
    _signal(
        "close",
        "close-unknown-field",
        "an unknown field (`now`)",
        (_j({"now": True}),),
        "InvalidInput",
    ),
)

QUERY = "`describe` query (temporal CLI)"
_add(
    Entry("describe-array", QUERY, "an array (`[1]`)", "InvalidInput", Query(("[1]",))),
    Entry(
        "describe-string",
        QUERY,
        'a JSON string (`"everything"`)',
        "InvalidInput",
        Query(('"everything"',)),
    ),
    Entry(
        "describe-bad-bool",
        QUERY,
        '`include_data: "maybe"`',
        "InvalidInput",
        Query((_j({"include_data": "maybe"}),)),
    ),
    Entry(
        "describe-unknown-field",
        QUERY,
        "an unknown field (`verbose`)",
        "InvalidInput",
        Query((_j({"verbose": True}),)),
    ),
    Entry("describe-lone-surrogate", QUERY, '`"\\ud800"`', "InvalidInput", Query(('"\\ud800"',))),
)


def _control(name: str, id: str, input: str, payloads: tuple[str, ...], code: str) -> Entry:
    return Entry(id, f"`{name}` update", input, code, Update(name, payloads))


_add(
    _control(
        "reset_state",
        "reset-state-stores-string",
        '`stores: "kv"` (not a list)',
        (_j({"stores": "kv"}),),
        "InvalidInput",
    ),
    _control(
        "reset_state",
        "reset-state-unknown-store",
        "`stores: [kv, nope]`",
        (_j({"stores": ["kv", "nope"]}),),
        "UnknownStore",
    ),
    _control("reset_state", "reset-state-array", "an array", ("[]",), "InvalidInput"),
    _control(
        "compact_state",
        "compact-state-strategy",
        '`strategy: "shred"`',
        (_j({"strategy": "shred"}),),
        "InvalidInput",
    ),
    _control(
        "compact_state",
        "compact-state-negative",
        "`max_tokens: -5`",
        (_j({"max_tokens": -5}),),
        "InvalidInput",
    ),
    _control(
        "describe_state",
        "describe-state-bad-bool",
        '`include_data: "maybe"`',
        (_j({"include_data": "maybe"}),),
        "InvalidInput",
    ),
    _control(
        "describe_state", "describe-state-two-inputs", "two inputs", ("{}", "{}"), "InvalidInput"
    ),
)


def _client(method: str, id: str, input: str, code: str, **kwargs: Any) -> Entry:
    return Entry(id, f"`AgentSessionClient.{method}`", input, code, ClientCall(method, kwargs))


_add(
    _client(
        "send",
        "client-agent-slash",
        "agent id `a/b`",
        "InvalidIdentifier",
        agent_id="a/b",
        content="hi",
    ),
    _client(
        "send",
        "client-empty-session",
        "empty session id",
        "InvalidIdentifier",
        session_id="",
        content="hi",
    ),
    _client(
        "send",
        "client-oversized-content",
        "content over 512 KiB",
        "ContentTooLarge",
        content="x" * (MAX_MESSAGE_BYTES + 1),
    ),
    _client(
        "send",
        "client-unknown-role",
        '`role="wizard"`',
        "InvalidInput",
        content="hi",
        role="wizard",
    ),
    _client(
        "send",
        "client-ttl-zero",
        "`ttl_seconds=0` for a new session",
        "InvalidInput",
        content="hi",
        ttl_seconds=0,
    ),
    _client(
        "send",
        "client-turn-id-space",
        '`turn_id="turn 1"`',
        "InvalidIdentifier",
        content="hi",
        turn_id="turn 1",
    ),
    _client(
        "reset", "client-reset-unknown-store", '`stores=["nope"]`', "UnknownStore", stores=["nope"]
    ),
    _client(
        "reset",
        "client-reset-stores-string",
        '`stores="kv"` (not a list)',
        "InvalidInput",
        stores="kv",
    ),
    _client(
        "compact", "client-compact-negative", "`max_messages=-1`", "InvalidInput", max_messages=-1
    ),
    _client(
        "compact",
        "client-compact-unknown-option",
        "an unknown option (`aggressive=True`)",
        "InvalidInput",
        aggressive=True,
    ),
    _client(
        "pause",
        "client-pause-long-reason",
        "a reason of 1,001 characters",
        "InvalidInput",
        reason="r" * 1001,
    ),
    _client(
        "add_hint",
        "client-hint-4001",
        "a hint of 4,001 characters",
        "InvalidInput",
        text="h" * 4001,
    ),
    _client(
        "migrate",
        "client-migrate-path",
        '`task_queue="../queue"`',
        "InvalidIdentifier",
        task_queue="../queue",
    ),
    _client(
        "describe",
        "client-describe-unknown",
        "a session id that was never started",
        "SessionNotFound",
        session_id="never-started",
    ),
    Entry(
        "client-bad-namespace",
        "`AgentSessionClient(...)`",
        '`namespace="tenant one"`',
        "InvalidIdentifier",
        ClientCall("__init__", {"namespace": "tenant one"}),
    ),
)


def _bundle(id: str, input: str, defect: str, code: str = "InvalidBundle", **kw: Any) -> Entry:
    return Entry(id, BUNDLE, input, code, BundleImport(defect, **kw))


_add(
    _bundle("bundle-truncated", "the file cut in half", "truncated"),
    _bundle("bundle-not-json", "a file that is not JSON", "not_json"),
    _bundle("bundle-empty", "an empty file", "empty"),
    _bundle("bundle-wrong-format", '`format: "statecore.other"`', "wrong_format"),
    _bundle("bundle-schema-version", "`schema_version: 2` (checksum recomputed)", "schema_version"),
    _bundle("bundle-checksum", "content edited after export", "checksum"),
    _bundle("bundle-seq-gap", "message seqs 1, 5, ... (checksum recomputed)", "seq_gap"),
    _bundle("bundle-token-totals", "cumulative token counts that do not add up", "token_totals"),
    _bundle("bundle-bad-id", "agent id `a/b` inside the bundle (checksum recomputed)", "bad_id"),
    _bundle(
        "bundle-occupied",
        "a valid bundle over a session that holds data, no replace",
        "none",
        "AlreadyExists",
        replace=False,
    ),
)


def _turn(id: str, input: str, code: str, concurrent: bool = False, **request: Any) -> Entry:
    return Entry(id, TURN_API, input, code, TurnApi({"turn_id": "bad", **request}, concurrent))


def _kv(bucket: str, key: str, **value: Any) -> list[dict[str, Any]]:
    return [{"bucket": bucket, "key": key, **(value or {"value": 1})}]


_add(
    _turn("turn-kv-bucket-path", "KV bucket `../etc`", "InvalidIdentifier", kv=_kv("../etc", "k")),
    _turn(
        "turn-kv-bucket-reserved",
        "KV bucket `turn` (turn records)",
        "InvalidIdentifier",
        kv=_kv("turn", "k"),
    ),
    _turn(
        "turn-kv-bucket-tool",
        "KV bucket `tool.search` (a tools slot)",
        "InvalidIdentifier",
        kv=_kv("tool.search", "k"),
    ),
    _turn(
        "turn-kv-key-sql",
        "KV key `k';DROP TABLE kv_entries;--`",
        "InvalidIdentifier",
        kv=_kv("prefs", "k';DROP TABLE kv_entries;--"),
    ),
    _turn(
        "turn-kv-key-nul",
        "KV key with a NUL character",
        "InvalidIdentifier",
        kv=_kv("prefs", "k\x00"),
    ),
    _turn(
        "turn-kv-value-oversize",
        "a KV value of 1 MiB + 1 byte (committed without a model call)",
        "ContentTooLarge",
        kv=_kv("prefs", "big", bytes_size=MIB + 1),
        commit_only=True,
    ),
    _turn(
        "turn-kv-value-nul",
        "a JSON KV value holding a NUL character",
        "InvalidInput",
        kv=_kv("prefs", "k", value={"v": "a\x00"}),
    ),
    Entry(
        "turn-id-slash", TURN_API, "turn id `a/b`", "InvalidIdentifier", TurnApi({"turn_id": "a/b"})
    ),
    _turn(
        "turn-state-over-16mb",
        "a scoped-state document over 16 MB (committed without a model call)",
        "StateTooLarge",
        notes_size=MAX_STATE_BYTES,
        commit_only=True,
    ),
    _turn(
        "turn-state-non-object",
        "a JSON array as the state document",
        "InvalidInput",
        state_value=[1, 2],
    ),
    _turn(
        "turn-state-stale-version",
        "a state write whose version another turn moved on",
        "VersionConflict",
        concurrent=True,
        hold=True,
    ),
    _turn(
        "turn-state-too-big-for-a-model-call",
        "3 MB of state buffered in a turn that calls the model",
        "ContentTooLarge",
        action="Commit large state with `turn.commit()` (no model call), or store it by reference.",
        notes_size=3 * MIB,
    ),
)

# Advice more precise than the code's general one.
_ADVICE = {
    **dict.fromkeys(
        [
            "send-array",
            "send-null",
            "send-number",
            "send-no-input",
            "send-not-json",
            "send-binary",
            "pause-array",
            "resume-string",
            "reset-number",
            "hint-null",
            "describe-array",
            "describe-string",
            "reset-state-array",
        ],
        NOT_AN_OBJECT,
    ),
    **dict.fromkeys(
        [
            "send-lone-surrogate",
            "pause-lone-surrogate",
            "hint-lone-surrogate",
            "describe-lone-surrogate",
        ],
        UTF8,
    ),
    **dict.fromkeys(["send-deep-nesting", "hint-deep-nesting"], NESTING),
    **dict.fromkeys(
        ["send-two-inputs", "resume-two-inputs", "describe-state-two-inputs"], ONE_INPUT
    ),
    **dict.fromkeys(["send-name-nul", "send-metadata-nul", "hint-nul", "turn-kv-value-nul"], NUL),
}
ENTRIES[:] = [
    replace(entry, action=_ADVICE[entry.id]) if entry.id in _ADVICE else entry for entry in ENTRIES
]

REFERENCES: list[Reference] = [
    Reference(
        "store modules (`tx.conversation`, `tx.kv`, `tx.state`, `tx.flow`, `tx.orchestration`)",
        "tests/store/test_bad_input.py, tests/store/test_bad_identifiers_and_limits.py",
        "bad content, values, identifiers, keys, limits and stale revisions/versions, on every"
        " backend",
    ),
    Reference(
        "bundle files",
        "tests/test_bundle.py",
        "every truncation of a bundle file, corrupted fields, inconsistent bundle objects",
    ),
    Reference(
        "tools and task slots",
        "tests/test_slots.py",
        "reserved buckets, bad tool names, bad task transitions",
    ),
    Reference(
        "control plane (`statecore.control`)",
        "tests/test_control.py",
        "refused resets (empty store list, ambiguous namespace reset)",
    ),
    Reference(
        "`statecore` command line",
        "tests/cli/",
        "bad arguments, database URLs and session commands",
    ),
]
