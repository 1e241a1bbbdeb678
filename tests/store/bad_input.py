"""The harness of the bad-input conformance tables: a populated namespace, builders for
input that skipped validation, and the check that a rejected call changed nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from statecore.core._errors import StatecoreError
from statecore.core._models import KVScope, Message, SessionRef
from statecore.store import StateStore
from tests.store.helpers import snapshot, tool_exchange, user


@dataclass
class Env:
    """A populated namespace: two sessions with rows in every store, plus shared rows."""

    ref: SessionRef
    sibling: SessionRef
    ns: str

    @property
    def scope(self) -> KVScope:
        return self.ref.kv_scope


Call = Callable[[Any, Env], Awaitable[Any]]


async def populate(store: StateStore, ref: SessionRef, sibling: SessionRef) -> Env:
    ns = ref.namespace
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


def raw_message(**fields: Any) -> Message:
    """A message built without validation, as a buggy or hostile caller could send it."""
    return Message.model_construct(**{"content": "", "tool_calls": [], "metadata": {}, **fields})


def ref_with(env: Env, **ids: str) -> SessionRef:
    """``env.ref`` with other ids, built without validation."""
    return SessionRef.model_construct(**{**env.ref.model_dump(), **ids})


class Cases:
    """Collects ``pytest.param(call, error, id=name)`` rows for a parametrized table."""

    def __init__(self) -> None:
        self.rows: list[Any] = []

    def __call__(self, name: str, error: type[StatecoreError], call: Call) -> None:
        self.rows.append(pytest.param(call, error, id=name))


async def assert_rejected_without_change(
    store: StateStore, env: Env, call: Call, error: type[StatecoreError]
) -> None:
    """``call`` raises exactly ``error`` and every row readable before is unchanged after."""
    ghost = ref_with(env, session_id="ghost")
    refs = [env.ref, env.sibling, ghost]
    before = await snapshot(store, env.ns, refs)
    with pytest.raises(StatecoreError) as raised:
        async with store.transaction() as tx:
            await call(tx, env)
    assert raised.type is error, f"expected {error.__name__}, got {raised.type.__name__}"
    assert await snapshot(store, env.ns, refs) == before
