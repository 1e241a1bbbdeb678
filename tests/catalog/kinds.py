"""The vocabulary of the bad-input catalog: how an entry is applied, what an entry says,
and the advice given for each error code."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    "StateTooLarge": (
        "Keep the document under 16 MiB; to read more than 1 MiB in a turn, turn on "
        "`blob_threshold_bytes` (docs/large_values.md)."
    ),
    "InvalidBundle": "Export the session again and copy the whole file; do not edit bundles.",
    "AlreadyExists": "Import with `replace=True` (or `--replace`), or into another session id.",
    "VersionConflict": "Re-read the state and apply the change again (optimistic concurrency).",
    "SessionNotFound": "Check the ids, or send a message: that opens the session.",
    "ResetRefused": 'Name what to clear: `{"stores": [...]}`, or `{"all": true}` for every store.',
    "UnknownOperation": "Use a name the session handles (case-sensitive); the message lists them.",
    "InvalidLimit": "Use a whole number within the range the message gives (docs/limits.md).",
    "ContextBudgetExceeded": (
        "Shorten the message, raise `profile.max_tokens`, or store the text in KV or scoped"
        " state and send a reference."
    ),
    "PayloadTooLarge": (
        "Send large data by reference: write it to KV or scoped state (a claim check) and"
        " send its key."
    ),
}


UTF8 = "Send valid UTF-8 text; a lone surrogate (`\\ud800` to `\\udfff`) is never text."
NESTING = "Flatten the data: JSON nested more than a couple of hundred levels is refused."
ONE_INPUT = "Send exactly one JSON object (one `--input`)."
NUL = "Strip NUL characters (U+0000): no backend can store them."
NOT_AN_OBJECT = "Send one JSON object (`json/plain`), not a bare value, bytes or nothing."


def as_json(value: Any) -> str:
    return json.dumps(value)


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels
