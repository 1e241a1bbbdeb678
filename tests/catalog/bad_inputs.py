"""The bad-input catalog: every kind of bad input statecore's entry points refuse, as data.

Each entry names the entry point, the input (in words, for docs/bad-input.md), the error
code a caller gets (``statecore.core._errors``), what the caller should do, and how to apply it
(one of the apply types of ``tests.catalog.kinds``). ``test_bad_input_catalog.py`` applies
every entry to a live session and checks the three promises: a typed error, a session that
keeps working, and stored rows left exactly as they were. ``python -m tests.catalog.render``
writes the docs table from the same list. The entries themselves live in
``workflow_entries.py`` and ``library_entries.py``.
"""

from __future__ import annotations

from dataclasses import replace

from tests.catalog.kinds import (
    NESTING,
    NOT_AN_OBJECT,
    NUL,
    ONE_INPUT,
    UTF8,
    BundleImport,
    ClientCall,
    Entry,
    Query,
    Reference,
    Signal,
    TurnApi,
    Update,
)
from tests.catalog.library_entries import LIBRARY_ENTRIES
from tests.catalog.workflow_entries import WORKFLOW_ENTRIES

__all__ = [
    "ENTRIES",
    "REFERENCES",
    "BundleImport",
    "ClientCall",
    "Entry",
    "Query",
    "Signal",
    "TurnApi",
    "Update",
]

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
ENTRIES: list[Entry] = [
    replace(entry, action=_ADVICE[entry.id]) if entry.id in _ADVICE else entry
    for entry in [*WORKFLOW_ENTRIES, *LIBRARY_ENTRIES]
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
        "tests/test_tool_and_task_buckets.py",
        "reserved buckets, bad tool names, bad task transitions",
    ),
    Reference(
        "control plane (`statecore.operations._control_plane`)",
        "tests/test_control.py",
        "refused resets (empty store list, ambiguous namespace reset)",
    ),
    Reference(
        "`statecore` command line",
        "tests/cli/",
        "bad arguments, database URLs and session commands",
    ),
    Reference(
        "OpenAI Agents SDK session (`StatecoreSession`)",
        "tests/integrations/openai_agents/test_session.py",
        "items that are not JSON objects (bytes, NaN, text, a bare object), items over 512 KiB,"
        " NUL characters, a function output without its call id (`InvalidInput`,"
        " `ContentTooLarge`: nothing stored, the session goes on); session ids statecore"
        " cannot store (`InvalidIdentifier`, refused, never rewritten)",
    ),
    Reference(
        "OpenAI Agents SDK agents as turns (`StatecorePlugin(agents=...)`)",
        "tests/temporal/test_framework_turns.py,"
        " tests/integrations/openai_agents/test_agent_turn_activity.py,"
        " tests/temporal/test_send_options.py",
        "a session naming an agent or model the worker does not have (`UnknownAgent`, naming"
        " the ones it has; a session that refused turn opened ends with it, so the next send,"
        " naming another model or none, is answered); a run that raises in a tool"
        " (`AgentRunFailed`): nothing stored, the next turn commits",
    ),
    Reference(
        "Pydantic AI conversation store (`StatecoreConversationStore`)",
        "tests/integrations/pydantic_ai/",
        "a stale revision (`ConversationConflict`, Pydantic AI's own error, also between two"
        " processes), a message over 512 KiB as JSON (`ContentTooLarge`), messages that do not"
        " parse (`InvalidInput`), conversation ids statecore cannot store (`InvalidIdentifier`,"
        " refused, never rewritten): nothing stored, the store goes on",
    ),
    Reference(
        "Pydantic AI agents as turns (`StatecorePlugin(agents=...)`)",
        "tests/temporal/test_framework_turns.py, tests/temporal/test_pydantic_ai_turns.py",
        "an agent the worker does not have (`UnknownAgent`); a tool that raises"
        " (`AgentRunFailed`); a part over 512 KiB (`ContentTooLarge`); a stored message that does"
        " not parse (`InvalidInput`): nothing stored, the next turn commits",
    ),
    Reference(
        "Google ADK session service (`StatecoreSessionService`)",
        "tests/integrations/google_adk/test_bad_input.py",
        "state keys that are not text, empty, or a bare scope prefix (`app:`, `user:`, `temp:`)"
        " (`InvalidInput`); an event over 512 KiB as JSON (`ContentTooLarge`); a stale session"
        " object (`StaleSession`, also ADK's `StaleSessionError`); a taken session id"
        " (`AlreadyExists`, also ADK's); app, user or session ids statecore cannot store"
        " (`InvalidIdentifier`, never rewritten): nothing stored, the session takes the next"
        " event",
    ),
    Reference(
        "Google ADK agents as turns (`StatecorePlugin(agents=...)`)",
        "tests/temporal/test_framework_turns.py",
        "a session naming an agent or model the worker does not have (`UnknownAgent`); a run that"
        " raises in a tool (`AgentRunFailed`): nothing stored, the next turn commits",
    ),
]
