"""Catalog entries of the AgentSession workflow: the ``send_message`` update, the signals
(sent by the real ``temporal`` CLI), the ``describe`` query and the control updates."""

from __future__ import annotations

from typing import Any

from statecore.core._limits import MAX_MESSAGE_BYTES
from tests.catalog.kinds import MIB, Entry, Query, Signal, Update, as_json, nested

WORKFLOW_ENTRIES: list[Entry] = []


def _add(*entries: Entry) -> None:
    WORKFLOW_ENTRIES.extend(entries)


SEND = "`send_message` update"


def _send(id: str, input: str, payload: str, code: str, **kw: Any) -> Entry:
    return Entry(id, SEND, input, code, Update("send_message", (payload,)), **kw)


_add(
    _send("send-array", "a JSON array instead of an object", "[1, 2]", "InvalidInput"),
    _send("send-null", "`null` (no turn_id)", "null", "InvalidInput"),
    _send("send-number", "a number", "42", "InvalidInput"),
    _send(
        "send-content-number",
        "`content` is a number",
        as_json({"turn_id": "x", "content": 7}),
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
        '{"turn_id": "x", "content": "hi", "metadata": {"a": ' + nested(5000) + "}}",
        "InvalidInput",
    ),
    Entry(
        "send-two-inputs",
        SEND,
        "two JSON objects as two inputs",
        "InvalidInput",
        Update(
            "send_message",
            (as_json({"turn_id": "x", "content": "a"}), as_json({"turn_id": "y", "content": "b"})),
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
        as_json({"turn_id": "x", "content": "x" * (MAX_MESSAGE_BYTES + 1)}),
        "ContentTooLarge",
    ),
    _send(
        "send-escaped-content-over-limit",
        "120,000 control characters: 120 KB of text, 720 KB as escaped JSON",
        as_json({"turn_id": "x", "content": "\x01" * 120_000}),
        "ContentTooLarge",
    ),
    _send(
        "send-oversized-metadata",
        "1.5 MB of metadata next to a short content",
        as_json({"turn_id": "x", "content": "hi", "metadata": {"blob": "m" * 1_500_000}}),
        "ContentTooLarge",
    ),
    _send(
        "send-never-fits-budget",
        "content of 130,000 tokens, over the offline model's budget of 123,904",
        as_json({"turn_id": "x", "content": "é" * 130_000}),
        "ContextBudgetExceeded",
    ),
    _send(
        "send-name-nul",
        "`name` with a NUL character",
        as_json({"turn_id": "x", "content": "hi", "name": "a\x00b"}),
        "InvalidInput",
    ),
    _send(
        "send-name-too-long",
        "`name` of 300 characters",
        as_json({"turn_id": "x", "content": "hi", "name": "n" * 300}),
        "InvalidInput",
    ),
    _send(
        "send-metadata-nul",
        "metadata holding a NUL character",
        as_json({"turn_id": "x", "content": "hi", "metadata": {"k": "a\x00"}}),
        "InvalidInput",
    ),
    _send(
        "send-turn-id-sql",
        "turn_id with SQL metacharacters (`t';DROP TABLE messages;--`)",
        as_json({"turn_id": "t';DROP TABLE messages;--", "content": "hi"}),
        "InvalidIdentifier",
    ),
    _send(
        "send-turn-id-too-long",
        "turn_id of 600 characters",
        as_json({"turn_id": "t" * 600, "content": "hi"}),
        "InvalidIdentifier",
    ),
    _send(
        "send-turn-id-129",
        "turn_id of 129 characters (the store's limit is 128)",
        as_json({"turn_id": "t" * 129, "content": "hi"}),
        "InvalidIdentifier",
    ),
    _send(
        "send-turn-id-colon",
        "turn_id `turn:1` (':' separates workflow id parts; no id may hold it)",
        as_json({"turn_id": "turn:1", "content": "hi"}),
        "InvalidIdentifier",
    ),
    _send(
        "send-role-assistant",
        "`role: assistant` (a turn starts with a user or system message)",
        as_json({"turn_id": "x", "content": "hi", "role": "assistant"}),
        "InvalidInput",
    ),
    _send(
        "send-blank-content",
        "content of only whitespace",
        as_json({"turn_id": "x", "content": " \n\t"}),
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
        (as_json({"reason": "r" * MIB}),),
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
        (as_json({"reason": "x", "until": "5pm"}),),
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
        "reset",
        "reset-store-null",
        "`stores: [null]`",
        (as_json({"stores": [None]}),),
        "InvalidInput",
    ),
    _signal(
        "reset",
        "reset-unknown-store",
        "`stores` naming an unknown store",
        (as_json({"stores": ["conversation", "everything"]}),),
        "UnknownStore",
    ),
    _signal("reset", "reset-number", "a number", ("0",), "InvalidInput"),
    # A reset names what it clears: an empty dialog box wipes nothing.
    _signal("reset", "reset-names-nothing", "`{}`", ("{}",), "ResetRefused"),
    _signal(
        "reset",
        "reset-stores-and-all",
        '`{"stores": ["kv"], "all": true}`',
        (as_json({"stores": ["kv"], "all": True}),),
        "ResetRefused",
    ),
    _signal("reset", "reset-all-string", '`{"all": "yes"}`', ('{"all": "yes"}',), "InvalidInput"),
    _signal(
        "Pause", "signal-unknown-name", "a misspelled name (`Pause`)", ("{}",), "UnknownOperation"
    ),
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
        (as_json({"strategy": None}),),
        "InvalidInput",
    ),
    _signal(
        "compact",
        "compact-max-messages-zero",
        "`max_messages: 0`",
        (as_json({"max_messages": 0}),),
        "InvalidInput",
    ),
    _signal(
        "add_hint",
        "hint-1mib",
        "a 1 MiB hint",
        (as_json({"text": "h" * MIB}),),
        "ContentTooLarge",
        action="Keep hints short (at most 4,000 characters).",
    ),
    _signal(
        "add_hint",
        "hint-5000-chars",
        "a hint of 5,000 characters (limit 4,000)",
        (as_json({"text": "h" * 5000}),),
        "InvalidInput",
    ),
    _signal("add_hint", "hint-null", "`null` (no text)", ("null",), "InvalidInput"),
    _signal(
        "add_hint",
        "hint-deep-nesting",
        "`text` nested 5,000 arrays deep",
        ('{"text": ' + nested(5000) + "}",),
        "InvalidInput",
    ),
    _signal(
        "add_hint",
        "hint-nul",
        "text with a NUL character",
        (as_json({"text": "a\x00b"}),),
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
        "migrate",
        "migrate-number",
        "`task_queue: 5`",
        (as_json({"task_queue": 5}),),
        "InvalidInput",
    ),
    _signal(
        "migrate",
        "migrate-space",
        "`task_queue` with a space",
        (as_json({"task_queue": "queue two"}),),
        "InvalidIdentifier",
    ),
    _signal(
        "close",
        "close-delete-state-array",
        "`delete_state: [true]`",
        (as_json({"delete_state": [True]}),),
        "InvalidInput",
    ),
    _signal(
        "close",
        "close-unknown-field",
        "an unknown field (`now`)",
        (as_json({"now": True}),),
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
        Query((as_json({"include_data": "maybe"}),)),
    ),
    Entry(
        "describe-unknown-field",
        QUERY,
        "an unknown field (`verbose`)",
        "InvalidInput",
        Query((as_json({"verbose": True}),)),
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
        (as_json({"stores": "kv"}),),
        "InvalidInput",
    ),
    _control(
        "reset_state",
        "reset-state-unknown-store",
        "`stores: [kv, nope]`",
        (as_json({"stores": ["kv", "nope"]}),),
        "UnknownStore",
    ),
    _control("reset_state", "reset-state-array", "an array", ("[]",), "InvalidInput"),
    _control("reset_state", "reset-state-names-nothing", "`{}`", ("{}",), "ResetRefused"),
    Entry(
        "update-unknown-name",
        "an update under another name (`Reset_State`)",
        "`{}`",
        "UnknownOperation",
        Update("Reset_State", ("{}",)),
    ),
    _control(
        "compact_state",
        "compact-state-strategy",
        '`strategy: "shred"`',
        (as_json({"strategy": "shred"}),),
        "InvalidInput",
    ),
    _control(
        "compact_state",
        "compact-state-negative",
        "`max_tokens: -5`",
        (as_json({"max_tokens": -5}),),
        "InvalidInput",
    ),
    _control(
        "describe_state",
        "describe-state-bad-bool",
        '`include_data: "maybe"`',
        (as_json({"include_data": "maybe"}),),
        "InvalidInput",
    ),
    _control(
        "describe_state", "describe-state-two-inputs", "two inputs", ("{}", "{}"), "InvalidInput"
    ),
)
