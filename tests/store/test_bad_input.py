"""Conformance: bad content, values and conflicting writes raise their typed error and
leave every stored row unchanged (read back before and after)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from statecore.core._errors import (
    AlreadyExistsError,
    ContentTooLargeError,
    EmptyContentError,
    InvalidIdentifierError,
    InvalidInputError,
    InvalidLimitError,
    NotFoundError,
    RevisionConflictError,
    SessionNotFoundError,
    StatecoreError,
    StateTooLargeError,
    VersionConflictError,
)
from statecore.core._limits import MAX_KV_VALUE_BYTES, MAX_MESSAGE_BYTES, MAX_STATE_BYTES
from statecore.core._models import Message, OrchestrationUpdate, ToolCall
from statecore.store import StateStore
from tests.store.bad_input import (
    Call,
    Cases,
    Env,
    assert_rejected_without_change,
    raw_message,
    ref_with,
)
from tests.store.helpers import user


def _cases() -> list[Any]:
    case = Cases()

    # --- message content -----------------------------------------------------------------------
    def append(*messages: Message) -> Call:
        return lambda tx, e: tx.conversation.append(e.ref, "t9", list(messages))

    case("content-empty", EmptyContentError, append(raw_message(role="user", content="")))
    case("content-blank", EmptyContentError, append(raw_message(role="user", content=" \n\t ")))
    big = "x" * (MAX_MESSAGE_BYTES + 1)
    case("content-oversized", ContentTooLargeError, append(raw_message(role="user", content=big)))
    case("role-unknown", InvalidInputError, append(raw_message(role="robot", content="hi")))
    case(
        "content-lone-surrogate",
        InvalidInputError,
        append(raw_message(role="user", content="a\ud800")),
    )
    case("content-nul", InvalidInputError, append(raw_message(role="user", content="a\x00b")))
    case(
        "name-nul", InvalidInputError, append(raw_message(role="user", content="hi", name="n\x00"))
    )
    case("tool-without-call-id", InvalidInputError, append(raw_message(role="tool", content="42")))
    bad_calls = [ToolCall(id="c", name="f", arguments="{}")]
    case(
        "user-with-tool-calls",
        InvalidInputError,
        append(raw_message(role="user", content="hi", tool_calls=bad_calls)),
    )
    case(
        "metadata-not-json",
        InvalidInputError,
        append(raw_message(role="user", content="hi", metadata={"x": object()})),
    )
    case(
        "not-a-message",
        InvalidInputError,
        lambda tx, e: tx.conversation.append(e.ref, "t9", ["hello"]),
    )
    # A valid message before the bad one is not stored either: the call validates first.
    case(
        "good-then-bad",
        EmptyContentError,
        append(user("fine"), raw_message(role="user", content="")),
    )
    case(
        "start-index-negative",
        InvalidLimitError,
        lambda tx, e: tx.conversation.append(e.ref, "t9", [user("x")], start_index=-1),
    )
    case("hint-empty", EmptyContentError, lambda tx, e: tx.conversation.add_hint(e.ref, ""))
    case("hint-nul", InvalidInputError, lambda tx, e: tx.conversation.add_hint(e.ref, "a\x00"))
    case(
        "system-prompt-surrogate",
        InvalidInputError,
        lambda tx, e: tx.conversation.set_system_prompt(e.ref, "\udfff"),
    )
    case(
        "summary-empty", EmptyContentError, lambda tx, e: tx.conversation.set_summary(e.ref, "", 1)
    )

    # --- values --------------------------------------------------------------------------------
    case(
        "kv-nan",
        InvalidInputError,
        lambda tx, e: tx.kv.put(e.scope, "prefs", "theme", float("nan")),
    )
    case(
        "kv-not-json", InvalidInputError, lambda tx, e: tx.kv.put(e.scope, "prefs", "theme", {1, 2})
    )
    case(
        "kv-nul-in-json",
        InvalidInputError,
        lambda tx, e: tx.kv.put(e.scope, "prefs", "theme", {"a": "b\x00"}),
    )
    case(
        "kv-surrogate-in-json",
        InvalidInputError,
        lambda tx, e: tx.kv.put(e.scope, "prefs", "theme", "\ud800"),
    )
    case(
        "kv-bytes-too-large",
        ContentTooLargeError,
        lambda tx, e: tx.kv.put(e.scope, "prefs", "theme", b"x" * (MAX_KV_VALUE_BYTES + 1)),
    )
    case(
        "state-not-a-dict",
        InvalidInputError,
        lambda tx, e: tx.state.update(e.ns, "s1", "agent", ["not", "an", "object"]),
    )
    case(
        "state-over-16mb",
        StateTooLargeError,
        lambda tx, e: tx.state.update(e.ns, "s1", "agent", {"b": "x" * MAX_STATE_BYTES}),
    )
    case(
        "flow-data-nul",
        InvalidInputError,
        lambda tx, e: tx.flow.save(e.ref, "plan", "three", {"a": "\x00"}),
    )
    case(
        "orchestration-update-bad-tool",
        InvalidIdentifierError,
        lambda tx, e: tx.orchestration.update(
            e.ref, OrchestrationUpdate(recently_used_tools=["ok", "no/slash"])
        ),
    )
    case(
        "naive-now-expired",
        InvalidInputError,
        lambda tx, e: tx.sessions.expired(datetime(2031, 1, 1)),
    )
    case(
        "naive-now-sweep",
        InvalidInputError,
        lambda tx, e: tx.kv.sweep_expired(datetime(2031, 1, 1)),
    )

    # --- conflicts and missing rows ------------------------------------------------------------
    case(
        "kv-stale-revision",
        RevisionConflictError,
        lambda tx, e: tx.kv.put(e.scope, "prefs", "theme", "x", expected_revision=1),
    )
    case(
        "kv-must-not-exist",
        RevisionConflictError,
        lambda tx, e: tx.kv.put(e.scope, "prefs", "theme", "x", expected_revision=0),
    )
    case(
        "kv-delete-stale",
        RevisionConflictError,
        lambda tx, e: tx.kv.delete(e.scope, "prefs", "theme", expected_revision=1),
    )
    case(
        "state-stale-version",
        VersionConflictError,
        lambda tx, e: tx.state.update(e.ns, "s1", "agent", {}, expected_version=1),
    )
    case(
        "state-create-existing",
        AlreadyExistsError,
        lambda tx, e: tx.state.create(e.ns, "s1", "agent", {}),
    )
    case(
        "state-update-missing",
        NotFoundError,
        lambda tx, e: tx.state.update(e.ns, "nobody", "agent", {}),
    )
    case(
        "restore-into-non-empty",
        AlreadyExistsError,
        lambda tx, e: tx.conversation.restore(e.ref, []),
    )
    case(
        "append-to-missing-session",
        SessionNotFoundError,
        lambda tx, e: tx.conversation.append(ref_with(e, session_id="ghost"), "t", [user("x")]),
    )

    return case.rows


@pytest.mark.parametrize(("call", "error"), _cases())
async def test_bad_input_is_typed_and_changes_nothing(
    store: StateStore, env: Env, call: Call, error: type[StatecoreError]
) -> None:
    await assert_rejected_without_change(store, env, call, error)
