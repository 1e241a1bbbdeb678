"""Isolation on PostgreSQL: nothing one tenant, session or (task, agent) scope does through
the public API reads or changes another's data.

Two tenants (namespaces) hold sessions with the same ids, the same session id under two
agents, and the same task id with two agents (tests/isolation_data.py). Reads must show only
the owner's labels; writes, resets, sweeps, compaction and imports must leave every other
owner's rows (read with plain SQL) exactly as they were.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from statecore.core._errors import AlreadyExistsError
from statecore.core._models import ALL_STORES, KVScope, SessionRef
from statecore.core._tokens import TokenCounter
from statecore.operations import _control_plane as control
from statecore.operations._bundles import (
    export_namespace,
    export_session,
    import_namespace,
    import_session,
)
from statecore.operations._compaction import CompactionRequest
from statecore.store._tool_and_task_buckets import TaskSlots, ToolSlots
from statecore.store.sql import SqlStateStore
from statecore.temporal._devserver import DevServer
from tests.dbs import create_database, drop_database, fresh_database
from tests.isolation_data import Tenants, foreign_labels, owner, populate, step
from tests.isolation_writes import WRITES
from tests.sql_rows import Owner, feed_owner, rows_by_owner, without
from tests.store.conftest import FakeClock
from tests.temporal.conftest import dev_server, running_env

__all__ = ["dev_server"]  # the Temporal dev server fixture, for the worker test

pytestmark = pytest.mark.postgres

COUNTER = TokenCounter()


@pytest.fixture(scope="module")
async def pg_url() -> AsyncIterator[str]:
    """A migrated PostgreSQL database for this module (skips when the server is down)."""
    from statecore.store._migrate import upgrade_database

    url = await create_database("postgresql", "isolation")
    try:
        await upgrade_database(url)
        yield url
    finally:
        await drop_database(url)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(pg_url: str, clock: FakeClock) -> AsyncIterator[SqlStateStore]:
    opened = await SqlStateStore.connect(pg_url, token_counter=COUNTER, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def tenants(store: SqlStateStore) -> Tenants:
    """Fresh namespaces per test, so tests sharing the database never meet."""
    suffix = uuid.uuid4().hex[:8]
    made = Tenants(a=f"tenant-a-{suffix}", b=f"tenant-b-{suffix}")
    await populate(store, made)
    return made


async def assert_only_changed(
    url: str, before: dict[Owner, Any], *changed: Owner
) -> dict[Owner, Any]:
    """Every owner but ``changed`` has exactly the rows it had; returns the new rows. The
    change feeds of the changed owners' namespaces record the change, so they may change
    too; every other namespace's feed may not."""
    changed = (*changed, *{feed_owner(owner[0]) for owner in changed})
    after = await rows_by_owner(url)
    assert without(after, *changed) == without(before, *changed)
    return after


# --- reads -------------------------------------------------------------------------------------


async def _everything_shown(store: SqlStateStore, ref: SessionRef) -> dict[str, Any]:
    scope = ref.kv_scope
    async with store.transaction() as tx:
        return {
            "info": await tx.sessions.get(ref),
            "messages": await tx.conversation.messages(ref),
            "turn": await tx.conversation.turn_messages(ref, "t1"),
            "tail": await tx.conversation.tail(ref, max_messages=10),
            "hints": await tx.conversation.hints(ref),
            "summary": await tx.conversation.summary(ref),
            "kv": await tx.kv.entries(scope),
            "theme": await tx.kv.get(scope, "prefs", "theme"),
            "keys": await tx.kv.list_keys(scope, "prefs"),
            "buckets": await tx.kv.buckets(scope),
            "turn_records": await tx.turns.records(ref),
            "state": await tx.state.get(ref.namespace, ref.session_id, ref.agent_id),
            "flow": await tx.flow.history(ref, "plan"),
            "flow_latest": await tx.flow.latest(ref, "plan"),
            "orchestration": await tx.orchestration.get(ref),
            "tool": await ToolSlots(tx, ref).get("search", "last"),
            "tasks": await TaskSlots(tx, ref).list(),
        }


async def test_every_read_shows_only_its_own_owner(store: SqlStateStore, tenants: Tenants) -> None:
    for ref in tenants.all_refs:
        shown = await _everything_shown(store, ref)
        assert all(value is not None for value in shown.values())
        assert foreign_labels(shown, owner(ref), tenants) == []
        assert len(shown["messages"]) == 4
        assert shown["orchestration"].active_step == step(ref)
        assert sorted(shown["buckets"]) == ["blobs", "prefs", "task.records", "tool.search"]
        assert [turn_id for turn_id, _ in shown["turn_records"]] == ["t1"]
    async with store.transaction() as tx:
        for namespace in (tenants.a, tenants.b):
            assert await tx.sessions.list(namespace) == sorted(
                tenants.refs(namespace), key=lambda r: (r.agent_id, r.session_id)
            )
            states = await tx.state.list(namespace)
            assert {(s.namespace, s.task_id, s.agent_id) for s in states} == {
                (namespace, task, agent)
                for task, agent in [
                    ("s1", "planner"),
                    ("s2", "planner"),
                    ("s1", "coder"),
                    ("task-1", "planner"),
                    ("task-1", "coder"),
                ]
            }
            same_task = await tx.state.list(namespace, task_id="task-1")
            for state in same_task:
                own = (namespace, state.agent_id, "task-1")
                assert foreign_labels(state, own, tenants) == []
            shared = await tx.kv.entries(KVScope(namespace=namespace))
            assert foreign_labels(shared, (namespace, "", "shared"), tenants) == []


# --- writes through the store modules and slots ------------------------------------------------


@pytest.mark.parametrize("change", WRITES)
async def test_a_write_changes_only_its_owner(
    store: SqlStateStore, pg_url: str, tenants: Tenants, clock: FakeClock, change: Any
) -> None:
    before = await rows_by_owner(pg_url)
    clock.advance(5)  # so a touched timestamp differs
    async with store.transaction() as tx:
        target = await change(tx, tenants)
    after = await assert_only_changed(pg_url, before, target)
    assert after.get(target) != before[target], "the write changed nothing at all"


# --- the control plane -------------------------------------------------------------------------


async def test_describe_counts_and_shows_only_its_session(
    store: SqlStateStore, tenants: Tenants
) -> None:
    twin = SessionRef(namespace=tenants.b, agent_id="planner", session_id="s1")
    reports = {}
    for ref in (tenants.victim, twin):
        report = await control.describe(store, ref, include_data=True)
        assert foreign_labels(report, owner(ref), tenants) == []
        reports[ref] = {s.name: (s.exists, s.items) for s in report.stores}
    assert reports[tenants.victim] == reports[twin]
    assert reports[twin] == {
        "conversation": (True, 4),
        "kv": (True, 2),
        "state": (True, 1),
        "flow": (True, 2),
        "orchestration": (True, 1),
        "tools": (True, 1),
        "task": (True, 1),
    }


@pytest.mark.parametrize("stores", [None, *([name] for name in ALL_STORES)])
async def test_reset_of_one_session_touches_nothing_else(
    store: SqlStateStore, pg_url: str, tenants: Tenants, stores: list[str] | None
) -> None:
    before = await rows_by_owner(pg_url)
    report = await control.reset(store, tenants.victim, stores=stores)
    assert report.cleared == (stores or list(ALL_STORES))
    after = await assert_only_changed(pg_url, before, owner(tenants.victim))
    assert after[owner(tenants.victim)] != before[owner(tenants.victim)]


async def test_namespace_reset_touches_no_other_namespace(
    store: SqlStateStore, pg_url: str, tenants: Tenants
) -> None:
    before = await rows_by_owner(pg_url)
    await control.reset(store, None, namespace=tenants.a, all_sessions=True)
    after = await rows_by_owner(pg_url)
    # All that is left of the namespace is its change feed, which recorded the reset.
    assert [o for o in after if o[0] == tenants.a] == [feed_owner(tenants.a)]
    others = {o: rows for o, rows in before.items() if o[0] != tenants.a}
    assert without(after, feed_owner(tenants.a)) == others


async def test_compact_touches_nothing_else(
    store: SqlStateStore, pg_url: str, tenants: Tenants
) -> None:
    before = await rows_by_owner(pg_url)
    request = CompactionRequest(strategy="recent", max_messages=1)
    report = await control.compact(store, tenants.victim, request, counter=COUNTER)
    assert report.compacted == ["conversation"]
    await assert_only_changed(pg_url, before, owner(tenants.victim))


async def test_ttl_sweep_removes_only_what_expired(
    store: SqlStateStore, pg_url: str, tenants: Tenants, clock: FakeClock
) -> None:
    twin = SessionRef(namespace=tenants.b, agent_id="planner", session_id="s1")
    async with store.transaction() as tx:
        await tx.sessions.ensure(tenants.victim, ttl_seconds=60)
        await tx.kv.put(twin.kv_scope, "cache", "soon", 1, ttl_seconds=90)
        await tx.kv.put(twin.kv_scope, "cache", "later", 1, ttl_seconds=3600)
    before = await rows_by_owner(pg_url)
    clock.advance(minutes=2)
    report = await control.sweep(store)
    assert report.sessions == [tenants.victim]
    assert report.kv_keys == 1
    after = await assert_only_changed(pg_url, before, owner(tenants.victim), owner(twin))
    assert owner(tenants.victim) not in after
    async with store.transaction() as tx:
        assert [e.key for e in await tx.kv.entries(twin.kv_scope) if e.bucket == "cache"] == [
            "later"
        ]
    twin_before = {k: v for k, v in before[owner(twin)].items() if k != "kv_entries"}
    assert {k: v for k, v in after[owner(twin)].items() if k != "kv_entries"} == twin_before


# --- bundles -----------------------------------------------------------------------------------


async def test_export_holds_only_its_own_session(store: SqlStateStore, tenants: Tenants) -> None:
    bundle = await export_session(store, tenants.victim)
    assert foreign_labels(bundle, owner(tenants.victim), tenants) == []
    assert len(bundle.messages) == 4
    assert len(bundle.flows) == 2
    assert bundle.state is not None and bundle.state.agent_id == "planner"
    assert sorted({e.bucket for e in bundle.kv}) == [
        "blobs",
        "prefs",
        "task.records",
        "tool.search",
    ]
    assert [t.turn_id for t in bundle.turns] == ["t1"]


async def test_import_into_another_tenant_writes_only_the_target(
    store: SqlStateStore, pg_url: str, tenants: Tenants
) -> None:
    bundle = await export_session(store, tenants.victim)
    twin = SessionRef(namespace=tenants.b, agent_id="planner", session_id="s1")
    before = await rows_by_owner(pg_url)
    with pytest.raises(AlreadyExistsError):
        await import_session(store, bundle, target=twin)
    assert await rows_by_owner(pg_url) == before

    new = SessionRef(namespace=tenants.b, agent_id="planner", session_id="copy")
    await import_session(store, bundle, target=new)
    after = await assert_only_changed(pg_url, before, owner(new))
    assert owner(new) in after

    await import_session(store, bundle, target=twin, replace=True)
    await assert_only_changed(pg_url, after, owner(twin))


async def test_namespace_bundles_stay_in_their_namespace(
    store: SqlStateStore, pg_url: str, tenants: Tenants
) -> None:
    bundle = await export_namespace(store, tenants.a)
    assert {s.ref.namespace for s in bundle.sessions} == {tenants.a}
    assert {s.namespace for s in bundle.states} == {tenants.a}
    assert tenants.b not in str(bundle)
    before = await rows_by_owner(pg_url)

    copy = f"{tenants.a}-copy"
    await import_namespace(store, bundle, namespace=copy)
    after = await rows_by_owner(pg_url)
    assert without(after, *[o for o in after if o[0] == copy]) == before

    await import_namespace(store, bundle, namespace=tenants.b, replace=True)
    final = await rows_by_owner(pg_url)
    untouched = [o for o in after if o[0] != tenants.b]
    assert {o: final[o] for o in untouched} == {o: after[o] for o in untouched}


# --- AgentSessionClient through a real worker --------------------------------------------------


async def _log(url: str, ref: SessionRef) -> list[str]:
    opened = await SqlStateStore.connect(url, token_counter=COUNTER)
    try:
        async with opened.transaction() as tx:
            return [m.content for m in await tx.conversation.messages(ref)]
    finally:
        await opened.close()


@pytest.mark.temporal
async def test_session_clients_of_two_tenants_never_meet(dev_server: DevServer) -> None:
    # A database of its own: its sessions run on the real clock, which a sweep test's fake
    # clock would find long expired.
    async with (
        fresh_database("postgresql", "isoworker") as url,
        running_env(dev_server, url) as env,
    ):
        a = env.new_client(namespace="tenant-a")
        b = env.new_client(namespace="tenant-b")
        agent, other = env.agent, f"{env.agent}-other"
        first = await a.send(agent, "s1", "the secret of tenant A", turn_id="t1")
        # The same agent, session and turn ids in another tenant: a new turn, not a duplicate.
        twin = await b.send(agent, "s1", "hello from tenant B", turn_id="t1")
        same_session_id = await a.send(other, "s1", "another agent of A", turn_id="t1")
        for result in (first, twin, same_session_id):
            assert result.turn == 1 and not result.duplicate
            assert "user messages: 1," in result.reply.content
        refs = {
            "a": SessionRef(namespace="tenant-a", agent_id=agent, session_id="s1"),
            "b": SessionRef(namespace="tenant-b", agent_id=agent, session_id="s1"),
            "other": SessionRef(namespace="tenant-a", agent_id=other, session_id="s1"),
        }
        assert (await _log(url, refs["a"]))[0] == "the secret of tenant A"
        assert (await _log(url, refs["b"]))[0] == "hello from tenant B"
        assert (await _log(url, refs["other"]))[0] == "another agent of A"
        for ref in refs.values():
            assert len(await _log(url, ref)) == 2

        described = await b.describe(agent, "s1", include_data=True)
        assert described.namespace == "tenant-b"
        assert "secret" not in str(described) and "hello from tenant B" in str(described)

        before = await rows_by_owner(url)
        await b.reset(agent, "s1", all_stores=True)
        await assert_only_changed(url, before, owner(refs["b"]))
        before = await rows_by_owner(url)
        await a.compact(agent, "s1", strategy="recent", max_messages=1)
        await assert_only_changed(url, before, owner(refs["a"]))
        assert len(await _log(url, refs["a"])) == 2  # compaction keeps the log


# --- share tokens ----------------------------------------------------------------------------


async def test_a_share_reaches_only_the_shared_state_of_its_own_namespace(
    store: SqlStateStore, pg_url: str, tenants: Tenants
) -> None:
    from statecore.contract._activities import CommitTurnInput
    from statecore.contract._shares import ShareChanges, SharedWriteOp, ShareGrantOp
    from statecore.core._errors import ShareTokenUnknownError
    from statecore.operations._shares import new_token
    from statecore.operations._turn_commit import commit_turn

    victim = tenants.victim
    ticket = new_token()
    grant = ShareGrantOp(token=ticket.token, kind="state", access="read-write")
    async with store.transaction() as tx:
        await commit_turn(
            tx,
            CommitTurnInput(
                ref=victim, turn_id="share-1", turn=90, shares=ShareChanges(grants=[grant])
            ),
        )
    write = ShareChanges(
        writes=[SharedWriteOp(token=ticket.token, op="state", state={"label": "shared"})]
    )
    before = await rows_by_owner(pg_url)
    # The twin ids in the other tenant do not know the token: nothing anywhere changes.
    twin = SessionRef(namespace=tenants.b, agent_id="coder", session_id="s1")
    with pytest.raises(ShareTokenUnknownError):
        async with store.transaction() as tx:
            await commit_turn(tx, CommitTurnInput(ref=twin, turn_id="w1", turn=91, shares=write))
    assert await rows_by_owner(pg_url) == before

    # A session of the same tenant writes the victim's document, and nothing else of anyone.
    writer = SessionRef(namespace=tenants.a, agent_id="coder", session_id="s1")
    async with store.transaction() as tx:
        await commit_turn(tx, CommitTurnInput(ref=writer, turn_id="w1", turn=91, shares=write))
    ns_rows = (tenants.a, "", "")
    after = await assert_only_changed(pg_url, before, owner(victim), owner(writer), ns_rows)
    assert after[owner(victim)] != before[owner(victim)]
    for ref in (victim, twin):
        report = await control.describe(store, ref)
        assert foreign_labels(report, owner(ref), tenants) == []
        state_report = report.store("state")
        assert state_report is not None
        assert ("shares" in state_report.metadata) == (ref == victim)
