"""Two tenants with the same ids, for the isolation tests.

Each tenant (namespace) holds sessions (planner, s1), (planner, s2) and (coder, s1) - the same
session id under two agents - plus (task-1, planner) and (task-1, coder) scoped states - the
same task id with two agents - and namespace-wide KV. Every value a session or scope owns
carries its owner's label, so a read can prove it saw nobody else's data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statecore.core._models import KVScope, Message, SessionRef
from statecore.store import StateStore, StoreTransaction
from statecore.store._tool_and_task_buckets import TaskSlots, ToolSlots
from tests.sql_rows import Owner

SESSIONS = [("planner", "s1"), ("planner", "s2"), ("coder", "s1")]
TASK_SCOPES = [("task-1", "planner"), ("task-1", "coder")]
#: Long enough that a sweep test moving the clock by minutes expires none of these.
TTL_SECONDS = 10 * 86400


def label(namespace: str, agent_id: str, scope_id: str) -> str:
    """The text every value of this owner carries."""
    return f"{namespace}/{agent_id}/{scope_id}"


def step(ref: SessionRef) -> str:
    """The owner as an identifier (orchestration steps may not contain '/')."""
    return f"{ref.namespace}.{ref.agent_id}.{ref.session_id}"


def owner(ref: SessionRef) -> Owner:
    return (ref.namespace, ref.agent_id, ref.session_id)


@dataclass(frozen=True)
class Tenants:
    a: str
    b: str

    def refs(self, namespace: str) -> list[SessionRef]:
        return [SessionRef(namespace=namespace, agent_id=a, session_id=s) for a, s in SESSIONS]

    @property
    def all_refs(self) -> list[SessionRef]:
        return self.refs(self.a) + self.refs(self.b)

    @property
    def victim(self) -> SessionRef:
        """The session the tests act on; every other one has its twin ids somewhere."""
        return SessionRef(namespace=self.a, agent_id="planner", session_id="s1")

    def labels(self) -> list[str]:
        texts = [label(r.namespace, r.agent_id, r.session_id) for r in self.all_refs]
        texts += [step(r) for r in self.all_refs]
        for namespace in (self.a, self.b):
            texts += [label(namespace, agent, task) for task, agent in TASK_SCOPES]
            texts.append(label(namespace, "", "shared"))
        return texts


def _messages(text: str) -> list[Message]:
    return [
        Message(role="user", content=f"hello from {text}"),
        Message(role="assistant", content=f"reply to {text}"),
    ]


async def populate_session(tx: StoreTransaction, ref: SessionRef, number: int) -> None:
    """Rows in every store of ``ref``, each carrying the owner's label."""
    text = label(ref.namespace, ref.agent_id, ref.session_id)
    await tx.sessions.ensure(ref, ttl_seconds=TTL_SECONDS)
    await tx.conversation.set_system_prompt(ref, f"prompt of {text}")
    await tx.conversation.append(ref, "t1", _messages(text))
    await tx.conversation.append(ref, "t2", _messages(f"{text} again"))
    await tx.conversation.add_hint(ref, f"hint of {text}")
    await tx.conversation.set_summary(ref, f"summary of {text}", 2)
    await tx.conversation.set_window_start(ref, 3)
    await tx.flow.save(ref, "plan", "one", {"owner": text})
    await tx.flow.save(ref, "plan", "two", {"owner": text})
    await tx.orchestration.set_active_step(ref, step(ref))
    await tx.orchestration.add_used_tool(ref, "search")
    await tx.orchestration.add_token_usage(ref, 100 + number, 200 + number)
    await tx.kv.put(ref.kv_scope, "prefs", "theme", {"owner": text})
    await tx.kv.put(ref.kv_scope, "blobs", "raw", text.encode())
    await tx.turns.insert(ref, "t1", {"owner": text})
    await ToolSlots(tx, ref).put("search", "last", {"owner": text})
    tasks = TaskSlots(tx, ref)
    await tasks.upsert("job-1", {"owner": text})
    await tasks.transition("job-1", "working", f"started by {text}")
    await tx.state.create(ref.namespace, ref.session_id, ref.agent_id, {"owner": text})


async def populate(store: StateStore, tenants: Tenants) -> None:
    async with store.transaction() as tx:
        for number, ref in enumerate(tenants.all_refs):
            await populate_session(tx, ref, number)
        for namespace in (tenants.a, tenants.b):
            for task, agent in TASK_SCOPES:
                document = {"owner": label(namespace, agent, task)}
                await tx.state.create(namespace, task, agent, document)
            shared = KVScope(namespace=namespace)
            await tx.kv.put(shared, "shared", "k", {"owner": label(namespace, "", "shared")})


def foreign_labels(shown: Any, own: Owner, tenants: Tenants) -> list[str]:
    """Labels of owners other than ``own`` that appear in ``shown`` (any value, as text)."""
    namespace, agent_id, scope_id = own
    mine = {label(namespace, agent_id, scope_id), f"{namespace}.{agent_id}.{scope_id}"}
    text = str(shown)
    return [other for other in tenants.labels() if other not in mine and other in text]
