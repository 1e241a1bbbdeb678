"""Conformance: malformed identifiers and keys, and out-of-range limits, raise their typed
error and leave every stored row unchanged (read back before and after)."""

from __future__ import annotations

from typing import Any

import pytest

from statecore.core._errors import InvalidIdentifierError, InvalidLimitError, StatecoreError
from statecore.core._limits import MAX_PAGE_SIZE
from statecore.core._models import MAX_ID_LENGTH, MAX_KEY_LENGTH
from statecore.store import StateStore
from tests.store.bad_input import Call, Cases, Env, assert_rejected_without_change, ref_with
from tests.store.helpers import user

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
    case = Cases()

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
            lambda tx, e, b=bad: tx.sessions.ensure(ref_with(e, session_id=b)),
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
            lambda tx, e, b=bad: tx.conversation.append(ref_with(e, agent_id=b), "t", [user("x")]),
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
    return case.rows


@pytest.mark.parametrize(("call", "error"), _cases())
async def test_bad_identifier_or_limit_is_typed_and_changes_nothing(
    store: StateStore, env: Env, call: Call, error: type[StatecoreError]
) -> None:
    await assert_rejected_without_change(store, env, call, error)
