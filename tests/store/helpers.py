"""Small builders, a read-back snapshot and a SQLite lock holder shared by the store tests."""

from __future__ import annotations

import asyncio
from typing import Any

from statecore.core._models import KVScope, Message, SessionRef, ToolCall
from statecore.store import StateStore


def user(content: str, **extra: Any) -> Message:
    return Message(role="user", content=content, **extra)


def assistant(content: str, **extra: Any) -> Message:
    return Message(role="assistant", content=content, **extra)


def tool_exchange(call_id: str = "call-1") -> list[Message]:
    """An assistant tool request and its result (with name and metadata)."""
    return [
        Message(
            role="assistant",
            content="",
            tool_calls=[ToolCall(id=call_id, name="lookup", arguments='{"q": "weather"}')],
        ),
        Message(
            role="tool",
            content='{"temp": 21}',
            name="lookup",
            tool_call_id=call_id,
            metadata={"source": "test", "n": [1, 2.5, None, True]},
        ),
    ]


async def ensure(store: StateStore, *refs: SessionRef, ttl_seconds: int | None = None) -> None:
    async with store.transaction() as tx:
        for ref in refs:
            await tx.sessions.ensure(ref, ttl_seconds=ttl_seconds)


async def snapshot(store: StateStore, namespace: str, refs: list[SessionRef]) -> dict[str, Any]:
    """Everything the public API shows of ``namespace`` and ``refs``, as plain data, so a test
    can prove a failed call changed nothing."""
    async with store.transaction() as tx:
        shown: dict[str, Any] = {
            "sessions": [r.model_dump() for r in await tx.sessions.list(namespace, limit=1000)],
            "namespace_kv": [
                e.model_dump() for e in await tx.kv.entries(KVScope(namespace=namespace))
            ],
            "states": [s.model_dump() for s in await tx.state.list(namespace)],
        }
        for ref in refs:
            info = await tx.sessions.get(ref)
            part: dict[str, Any] = {
                "info": info and info.model_dump(),
                "kv": [e.model_dump() for e in await tx.kv.entries(ref.kv_scope)],
            }
            if info is not None:
                orchestration = await tx.orchestration.get(ref)
                summary = await tx.conversation.summary(ref)
                part |= {
                    "messages": [m.model_dump() for m in await tx.conversation.messages(ref)],
                    "hints": [h.model_dump() for h in await tx.conversation.hints(ref)],
                    "summary": summary and summary.model_dump(),
                    "flows": {
                        flow_id: [c.model_dump() for c in await tx.flow.history(ref, flow_id)]
                        for flow_id in await tx.flow.flows(ref)
                    },
                    "orchestration": orchestration and orchestration.model_dump(),
                }
            shown[str(ref)] = part
    return shown


_LOCK_HOLDER = KVScope(namespace="lock-holder")


async def hold_write_lock(
    store: StateStore, seconds: float, scope: KVScope = _LOCK_HOLDER
) -> asyncio.Task[None]:
    """Take the database's write lock through ``store`` (writing key b/k of ``scope`` in an
    open transaction: on SQLite, the one writer's lock) and keep it for ``seconds``. Returns
    once the lock is held, with the task that lets it go."""
    holding = asyncio.Event()

    async def hold() -> None:
        async with store.transaction() as tx:
            await tx.kv.put(scope, "b", "k", "holding")
            holding.set()
            await asyncio.sleep(seconds)

    held = asyncio.create_task(hold())
    await holding.wait()
    return held
