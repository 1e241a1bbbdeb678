"""Catalog entries of the library: AgentSessionClient, bundle import, and the turn API used
inside a user's own workflow (CatalogAgent)."""

from __future__ import annotations

from typing import Any

from statecore.core._limits import MAX_KV_VALUE_BYTES, MAX_MESSAGE_BYTES, MAX_STATE_BYTES
from tests.catalog.kinds import MIB, BundleImport, ClientCall, Entry, TurnApi

TURN_API = "turn API in a user workflow"
BUNDLE = "bundle import"

LIBRARY_ENTRIES: list[Entry] = []


def _add(*entries: Entry) -> None:
    LIBRARY_ENTRIES.extend(entries)


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
        "send",
        "client-turn-id-129",
        "`turn_id` of 129 characters",
        "InvalidIdentifier",
        content="hi",
        turn_id="t" * 129,
    ),
    _client(
        "send",
        "client-turn-id-colon",
        '`turn_id="turn:1"`',
        "InvalidIdentifier",
        content="hi",
        turn_id="turn:1",
    ),
    _client(
        "reset", "client-reset-unknown-store", '`stores=["nope"]`', "UnknownStore", stores=["nope"]
    ),
    _client("reset", "client-reset-names-nothing", "no stores and no `all_stores`", "ResetRefused"),
    _client(
        "reset",
        "client-reset-stores-and-all",
        '`stores=["kv"], all_stores=True`',
        "ResetRefused",
        stores=["kv"],
        all_stores=True,
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
    Entry(
        "client-payload-limit-tiny",
        "`AgentSessionClient(...)`",
        "`payload_limit_bytes=100` (below any session input)",
        "InvalidLimit",
        ClientCall("__init__", {"payload_limit_bytes": 100}),
    ),
    Entry(
        "client-payload-limit-string",
        "`AgentSessionClient(...)`",
        '`payload_limit_bytes="2MiB"`',
        "InvalidLimit",
        ClientCall("__init__", {"payload_limit_bytes": "2MiB"}),
    ),
    _client(
        "send",
        "client-message-over-budget",
        "a message of about 3,000 tokens with `profile.max_tokens` 1,000",
        "ContextBudgetExceeded",
        content=" ".join(f"word{i}" for i in range(1500)),
        profile={"max_tokens": 1000, "summarization_threshold": 800},
    ),
)


def _bundle(id: str, input: str, defect: str, code: str = "InvalidBundle", **kw: Any) -> Entry:
    return Entry(id, BUNDLE, input, code, BundleImport(defect, **kw))


_add(
    _bundle("bundle-truncated", "the file cut in half", "truncated"),
    _bundle("bundle-not-json", "a file that is not JSON", "not_json"),
    _bundle("bundle-empty", "an empty file", "empty"),
    _bundle("bundle-wrong-format", '`format: "statecore.other"`', "wrong_format"),
    _bundle("bundle-schema-version", "`schema_version: 3` (checksum recomputed)", "schema_version"),
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
        "a KV value of 16 MiB + 1 byte (committed without a model call)",
        "ContentTooLarge",
        kv=_kv("prefs", "big", bytes_size=MAX_KV_VALUE_BYTES + 1),
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
        "a scoped-state document over 16 MiB (committed without a model call)",
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
