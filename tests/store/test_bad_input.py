"""Conformance: bad input raises its typed error and leaves every stored row unchanged.

Each case runs against a populated namespace; the test reads everything back before and
after the failed call and compares."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from statecore.errors import (
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
from statecore.models import (
    MAX_ID_LENGTH,
    MAX_KEY_LENGTH,
    MAX_MESSAGE_BYTES,
    MAX_PAGE_SIZE,
    MAX_STATE_BYTES,
    KVScope,
    Message,
    OrchestrationUpdate,
    SessionRef,
    ToolCall,
)
from statecore.store import StateStore
from tests.store.helpers import snapshot, tool_exchange, user


@dataclass
class Env:
    ref: SessionRef
    sibling: SessionRef
    ns: str

    @property
    def scope(self) -> KVScope:
        return self.ref.kv_scope


@pytest.fixture
async def env(store: StateStore, make_ref, ns: str) -> Env:
    ref, sibling = make_ref("s1"), make_ref("s2")
    async with store.transaction() as tx:
        for r in (ref, sibling):
            await tx.sessions.ensure(r, ttl_seconds=600)
            await tx.conversation.append(r, "t1", [user("hello"), *tool_exchange()])
            await tx.conversation.append(r, "t2", [user("again")])
            await tx.conversation.set_system_prompt(r, "be brief")
            await tx.conversation.add_hint(r, "user likes tea")
            await tx.conversation.set_summary(r, "greetings", 2)
            await tx.conversation.set_window_start(r, 2)
            await tx.flow.save(r, "plan", "one", {"n": 1})
            await tx.flow.save(r, "plan", "two", {"n": 2})
            await tx.orchestration.add_used_tool(r, "search")
            await tx.kv.put(r.kv_scope, "prefs", "theme", "dark")
            await tx.kv.put(r.kv_scope, "prefs", "theme", "light")
            await tx.kv.put(r.kv_scope, "blobs", "raw", b"\x00\x01")
            await tx.kv.put(r.kv_scope, "cache", "tmp", [1], ttl_seconds=300)
        await tx.kv.put(KVScope(namespace=ns), "shared", "k", {"v": 1})
        await tx.state.create(ns, "s1", "agent", {"progress": 1})
        await tx.state.update(ns, "s1", "agent", {"progress": 2})
    return Env(ref=ref, sibling=sibling, ns=ns)


Call = Callable[[Any, Env], Awaitable[Any]]


def _raw(**fields: Any) -> Message:
    """A message built without validation, as a buggy or hostile caller could send it."""
    return Message.model_construct(**{"content": "", "tool_calls": [], "metadata": {}, **fields})


def _ref_with(env: Env, **ids: str) -> SessionRef:
    return SessionRef.model_construct(**{**env.ref.model_dump(), **ids})


BAD_IDS = {
    "slash": "a/b",
    "dotdot": "..",
    "dotdot-inside": "a..b",
    "single-quote": "a'b",
    "double-quote": 'a"b',
    "semicolon": "a;b",
    "space": "a b",
    "nul": "a\x00b",
    "empty": "",
    "leading-dash": "-a",
    "too-long": "a" * (MAX_ID_LENGTH + 1),
}
BAD_KEYS = {
    "slash": "a/b",
    "dotdot": "../etc",
    "single-quote": "k'",
    "semicolon": "k;DROP",
    "space": "k v",
    "nul": "k\x00",
    "percent": "k%",
    "empty": "",
    "too-long": "k" * (MAX_KEY_LENGTH + 1),
}
ABSURD = 10**12


def _cases() -> list[Any]:
    cases: list[Any] = []

    def case(name: str, error: type[StatecoreError], call: Call) -> None:
        cases.append(pytest.param(call, error, id=name))

    # --- message content -----------------------------------------------------------------------
    def append(*messages: Message) -> Call:
        return lambda tx, e: tx.conversation.append(e.ref, "t9", list(messages))

    case("content-empty", EmptyContentError, append(_raw(role="user", content="")))
    case("content-blank", EmptyContentError, append(_raw(role="user", content=" \n\t ")))
    big = "x" * (MAX_MESSAGE_BYTES + 1)
    case("content-oversized", ContentTooLargeError, append(_raw(role="user", content=big)))
    case("role-unknown", InvalidInputError, append(_raw(role="robot", content="hi")))
    case("content-lone-surrogate", InvalidInputError, append(_raw(role="user", content="a\ud800")))
    case("content-nul", InvalidInputError, append(_raw(role="user", content="a\x00b")))
    case("name-nul", InvalidInputError, append(_raw(role="user", content="hi", name="n\x00")))
    case("tool-without-call-id", InvalidInputError, append(_raw(role="tool", content="42")))
    bad_calls = [ToolCall(id="c", name="f", arguments="{}")]
    case(
        "user-with-tool-calls",
        InvalidInputError,
        append(_raw(role="user", content="hi", tool_calls=bad_calls)),
    )
    case(
        "metadata-not-json",
        InvalidInputError,
        append(_raw(role="user", content="hi", metadata={"x": object()})),
    )
    case(
        "not-a-message",
        InvalidInputError,
        lambda tx, e: tx.conversation.append(e.ref, "t9", ["hello"]),
    )
    # A valid message before the bad one is not stored either: the call validates first.
    case("good-then-bad", EmptyContentError, append(user("fine"), _raw(role="user", content="")))
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

    # --- identifiers and keys ------------------------------------------------------------------
    for label, bad in BAD_IDS.items():
        case(
            f"turn-id-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.conversation.append(e.ref, b, [user("x")]),
        )
        case(
            f"session-id-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.sessions.ensure(_ref_with(e, session_id=b)),
        )
        case(
            f"bucket-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.kv.put(e.scope, b, "k", 1),
        )
        case(
            f"flow-id-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.flow.save(e.ref, b, "step", {}),
        )
        case(
            f"task-id-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.state.create(e.ns, b, "agent", {}),
        )
        case(
            f"tool-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.orchestration.add_used_tool(e.ref, b),
        )
    for label in ("slash", "semicolon", "nul"):
        bad = BAD_IDS[label]
        case(
            f"agent-id-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.conversation.append(_ref_with(e, agent_id=b), "t", [user("x")]),
        )
        case(
            f"namespace-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.sessions.delete_namespace(b),
        )
        case(
            f"state-agent-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.state.update(e.ns, "s1", b, {}),
        )
    for label, bad in BAD_KEYS.items():
        case(
            f"key-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.kv.put(e.scope, "prefs", b, 1),
        )
        case(
            f"delete-key-{label}",
            InvalidIdentifierError,
            lambda tx, e, b=bad: tx.kv.delete(e.scope, "prefs", b),
        )
    case(
        "prefix-slash",
        InvalidIdentifierError,
        lambda tx, e: tx.kv.list_keys(e.scope, "prefs", "a/"),
    )
    case(
        "prefix-percent",
        InvalidIdentifierError,
        lambda tx, e: tx.kv.list_keys(e.scope, "prefs", "%"),
    )

    # --- limits --------------------------------------------------------------------------------
    for label, limit in {
        "zero": 0,
        "negative": -1,
        "over-max": MAX_PAGE_SIZE + 1,
        "absurd": ABSURD,
        "bool": True,
    }.items():
        case(
            f"list-keys-limit-{label}",
            InvalidLimitError,
            lambda tx, e, n=limit: tx.kv.list_keys(e.scope, "prefs", limit=n),
        )
        case(
            f"sessions-limit-{label}",
            InvalidLimitError,
            lambda tx, e, n=limit: tx.sessions.list(e.ns, limit=n),
        )
        case(
            f"messages-limit-{label}",
            InvalidLimitError,
            lambda tx, e, n=limit: tx.conversation.messages(e.ref, limit=n),
        )
        case(
            f"tail-max-messages-{label}",
            InvalidLimitError,
            lambda tx, e, n=limit: tx.conversation.tail(e.ref, max_messages=n),
        )
        case(
            f"expired-limit-{label}",
            InvalidLimitError,
            lambda tx, e, n=limit: tx.sessions.expired(tx.now, limit=n),
        )
    for label, tokens in {"zero": 0, "negative": -5, "absurd": ABSURD}.items():
        case(
            f"tail-max-tokens-{label}",
            InvalidLimitError,
            lambda tx, e, n=tokens: tx.conversation.tail(e.ref, max_tokens=n),
        )
    case(
        "from-seq-negative",
        InvalidLimitError,
        lambda tx, e: tx.conversation.messages(e.ref, from_seq=-1),
    )
    for label, ttl in {
        "zero": 0,
        "negative": -1,
        "nan": float("nan"),
        "inf": float("inf"),
        "absurd": ABSURD,
    }.items():
        case(
            f"kv-ttl-{label}",
            InvalidLimitError,
            lambda tx, e, t=ttl: tx.kv.put(e.scope, "prefs", "theme", "x", ttl_seconds=t),
        )
    for label, ttl in {"zero": 0, "negative": -1, "absurd": ABSURD}.items():
        case(
            f"session-ttl-{label}",
            InvalidLimitError,
            lambda tx, e, t=ttl: tx.sessions.ensure(e.ref, ttl_seconds=t),
        )
    case(
        "window-start-backwards",
        InvalidLimitError,
        lambda tx, e: tx.conversation.set_window_start(e.ref, 1),
    )
    case(
        "window-start-past-end",
        InvalidLimitError,
        lambda tx, e: tx.conversation.set_window_start(e.ref, 10),
    )
    case(
        "summary-past-end",
        InvalidLimitError,
        lambda tx, e: tx.conversation.set_summary(e.ref, "s", 99),
    )
    case(
        "token-usage-negative",
        InvalidLimitError,
        lambda tx, e: tx.orchestration.add_token_usage(e.ref, -1, 0),
    )
    case(
        "expected-revision-negative",
        InvalidLimitError,
        lambda tx, e: tx.kv.put(e.scope, "prefs", "theme", "x", expected_revision=-1),
    )
    case("flow-version-zero", InvalidLimitError, lambda tx, e: tx.flow.load(e.ref, "plan", 0))

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
        lambda tx, e: tx.kv.put(e.scope, "prefs", "theme", b"x" * (2**20 + 1)),
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
        lambda tx, e: tx.conversation.append(_ref_with(e, session_id="ghost"), "t", [user("x")]),
    )
    return cases


@pytest.mark.parametrize(("call", "error"), _cases())
async def test_bad_input_is_typed_and_changes_nothing(
    store: StateStore, env: Env, call: Call, error: type[StatecoreError]
) -> None:
    ghost = _ref_with(env, session_id="ghost")
    refs = [env.ref, env.sibling, ghost]
    before = await snapshot(store, env.ns, refs)
    with pytest.raises(StatecoreError) as raised:
        async with store.transaction() as tx:
            await call(tx, env)
    assert raised.type is error, f"expected {error.__name__}, got {raised.type.__name__}"
    assert await snapshot(store, env.ns, refs) == before
