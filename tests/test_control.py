"""The control plane on real stores: describe, precise reset, compact and sweep."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from statecore.core._errors import ResetRefusedError, UnknownStoreError
from statecore.core._models import ALL_STORES, KVScope, Message, SessionRef
from statecore.core._tokens import TokenCounter
from statecore.operations._compaction import CompactionRequest
from statecore.operations._control_plane import compact, describe, reset, sweep
from statecore.operations._turn_commit import TURN_META_BUCKET
from statecore.store._tool_and_task_buckets import TaskSlots, ToolSlots
from tests.session_data import populate, snapshot
from tests.store_backends import BACKENDS, open_backend

COUNTER = TokenCounter()
REF = SessionRef(namespace="ns1", agent_id="agent", session_id="s1")
SIBLING = SessionRef(namespace="ns1", agent_id="agent", session_id="s2")
OTHER_AGENT = SessionRef(namespace="ns1", agent_id="agent2", session_id="s1")
OTHER_NS = SessionRef(namespace="ns2", agent_id="agent", session_id="s1")
NEIGHBOURS = (SIBLING, OTHER_AGENT, OTHER_NS)


@pytest.fixture(params=[*BACKENDS, pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request, tmp_path):
    async with open_backend(request.param, tmp_path) as store:
        yield store


@pytest.fixture
async def populated(store):
    """REF and its three neighbours all hold data in every store."""
    for ref in (REF, *NEIGHBOURS):
        await populate(store, ref)
    return store


async def _neighbours(store) -> list:
    return [await snapshot(store, ref) for ref in NEIGHBOURS]


# --- describe ---------------------------------------------------------------------------------


async def test_describe_missing_session_reports_nothing_exists(store):
    result = await describe(store, REF)
    assert result.operation == "describe" and result.session_id == "s1"
    assert [s.name for s in result.stores] == list(ALL_STORES)
    assert not any(s.exists for s in result.stores)
    assert all(s.items == 0 for s in result.stores)


async def test_describe_counts_every_store(populated):
    result = await describe(populated, REF)
    by_name = {s.name: s for s in result.stores}
    assert [s.name for s in result.stores] == list(ALL_STORES)
    assert all(s.exists and s.enabled for s in result.stores)
    async with populated.transaction() as tx:
        messages = await tx.conversation.messages(REF)
    conv = by_name["conversation"]
    assert conv.items == 6
    assert conv.tokens == sum(m.tokens for m in messages)
    assert conv.metadata["last_seq"] == 6
    assert conv.metadata["window_start_seq"] == 3
    assert conv.metadata["window_messages"] == 4
    assert conv.metadata["window_tokens"] == sum(m.tokens for m in messages if m.seq >= 3)
    assert conv.metadata["has_summary"] is True
    assert conv.metadata["hints"] == 1
    assert conv.metadata["system_prompt_set"] is True
    assert conv.metadata["turn_records"] == 3  # three turns; the latest-turn marker is not one
    assert by_name["kv"].items == 2  # prefs/theme, blobs/b: the slots are counted apart
    assert by_name["kv"].metadata["buckets"] == ["blobs", "prefs"]
    assert by_name["tools"].items == 1 and by_name["tools"].metadata["tools"] == ["search"]
    assert by_name["task"].items == 1
    assert by_name["state"].metadata["version"] == 1
    assert by_name["flow"].items == 3 and by_name["flow"].metadata["flows"] == ["plan"]
    assert by_name["orchestration"].tokens == 15
    assert by_name["orchestration"].metadata["active_step"] == "research"
    assert all(s.data is None for s in result.stores)


async def test_describe_with_data(populated):
    result = await describe(populated, REF, include_data=True)
    conv = result.store("conversation")
    assert conv is not None and isinstance(conv.data, dict)
    assert [m["seq"] for m in conv.data["messages"]] == [3, 4, 5, 6]
    assert conv.data["summary"]["through_seq"] == 2
    assert [h["text"] for h in conv.data["hints"]] == ["prefer metric units"]
    assert conv.data["system_prompt"] == "You are terse."
    assert conv.metadata["data_truncated"] is False
    kv = result.store("kv")
    assert kv is not None and {e["bucket"] for e in kv.data} == {"prefs", "blobs"}
    tools = result.store("tools")
    assert tools is not None and [e["bucket"] for e in tools.data] == ["tool.search"]
    task = result.store("task")
    assert task is not None and task.data[0]["value"]["state"] == "working"
    state = result.store("state")
    assert state is not None and state.data == {"step": 1}
    flow = result.store("flow")
    assert flow is not None and [c["version"] for c in flow.data] == [3]


@pytest.mark.parametrize("word", ["word ", "言葉 ", "😀 "])
async def test_describe_data_is_capped_well_under_the_payload_warning(store, word):
    big = word * 3000  # 15-39 KB per message, more once JSON escapes it
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        for turn in range(40):
            await tx.conversation.append(REF, f"t{turn}", [Message(role="user", content=big)])
    result = await describe(store, REF, include_data=True)
    payload = max(
        len(json.dumps(result.model_dump(mode="json"), ensure_ascii=True)),
        len(result.model_dump_json().encode()),
    )
    assert payload < 384 * 1024
    conv = result.store("conversation")
    assert conv is not None and conv.metadata["data_truncated"] is True
    kept = conv.data["messages"]
    assert 0 < len(kept) < 40 and conv.metadata["data_messages"] == len(kept)
    assert kept[-1]["seq"] == 40  # the newest messages are the ones kept


async def test_describe_reports_scoped_state_without_a_session(store):
    async with store.transaction() as tx:
        await tx.state.create(REF.namespace, REF.session_id, REF.agent_id, {"a": 1})
    result = await describe(store, REF)
    assert [s.name for s in result.stores if s.exists] == ["state"]


# --- reset ------------------------------------------------------------------------------------


async def test_reset_session_clears_all_its_stores_and_nothing_else(populated):
    before = await _neighbours(populated)
    result = await reset(populated, REF)
    assert result.operation == "reset"
    assert result.cleared == list(ALL_STORES) and result.missing == []
    assert {s.name: s.metadata["removed"] for s in result.stores}["conversation"] == 6
    after = await describe(populated, REF)
    assert not any(s.exists for s in after.stores)
    assert await _neighbours(populated) == before
    # The header stays, so the session keeps its TTL and can take new turns at once.
    async with populated.transaction() as tx:
        info = await tx.sessions.get(REF)
        assert info is not None and info.ttl_seconds == 3600 and info.last_seq == 0
        stored = await tx.conversation.append(REF, "again", [Message(role="user", content="hi")])
    assert stored[0].seq == 1


@pytest.mark.parametrize(
    "names",
    [
        ["kv"],
        ["tools"],
        ["task"],
        ["state"],
        ["flow"],
        ["orchestration"],
        ["conversation"],
        ["task", "conversation"],
        ["tools", "kv", "kv"],
    ],
)
async def test_partial_reset_clears_exactly_the_named_stores(populated, names):
    before = await _neighbours(populated)
    result = await reset(populated, REF, stores=names)
    expected = [n for n in ALL_STORES if n in names]
    assert result.cleared == expected and result.missing == []
    exists = {s.name: s.exists for s in (await describe(populated, REF)).stores}
    assert exists == {n: n not in names for n in ALL_STORES}
    assert await _neighbours(populated) == before


async def test_reset_kv_spares_slot_buckets_even_with_lookalike_user_buckets(populated):
    async with populated.transaction() as tx:
        # Under an unescaped SQL LIKE, "too_" would match "tool.search" and "tas_" "task.*".
        for bucket in ("too_", "tas_", "t"):
            await tx.kv.put(REF.kv_scope, bucket, "k", 1)
    result = await reset(populated, REF, stores=["kv"])
    assert result.stores[0].metadata["removed"] == 5
    async with populated.transaction() as tx:
        assert await ToolSlots(tx, REF).get("search", "last") is not None
        assert await TaskSlots(tx, REF).get("task-1") is not None
        assert await tx.kv.buckets(REF.kv_scope) == [
            "task.records",
            "tool.search",
            TURN_META_BUCKET,
        ]


async def test_turn_records_go_with_the_conversation_not_with_kv(populated):
    kv_only = await reset(populated, REF, stores=["kv"])
    assert kv_only.cleared == ["kv"]
    async with populated.transaction() as tx:
        assert await tx.turns.get(REF, "turn-0") is not None
    conv = await reset(populated, REF, stores=["conversation"])
    # Three turn records and the latest-turn marker.
    assert conv.stores[0].metadata["turn_records_removed"] == 4
    async with populated.transaction() as tx:
        assert await tx.turns.get(REF, "turn-0") is None
        assert await tx.turns.count(REF) == 0
        assert await tx.kv.get(REF.kv_scope, TURN_META_BUCKET, "latest") is None
        assert await ToolSlots(tx, REF).get("search", "last") is not None


async def test_reset_reports_named_stores_that_held_nothing(store):
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        await tx.kv.put(REF.kv_scope, "prefs", "a", 1)
    result = await reset(store, REF, stores=["kv", "flow", "tools"])
    assert result.cleared == ["kv"] and result.missing == ["flow", "tools"]
    missing_session = await reset(store, SIBLING)
    assert missing_session.cleared == [] and missing_session.missing == list(ALL_STORES)


async def test_reset_state_without_a_session_header(store):
    async with store.transaction() as tx:
        await tx.state.create(REF.namespace, REF.session_id, REF.agent_id, {"a": 1})
    result = await reset(store, REF, stores=["state"])
    assert result.cleared == ["state"]
    async with store.transaction() as tx:
        assert await tx.state.get(REF.namespace, REF.session_id, REF.agent_id) is None


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"ref": REF, "stores": ["conversation", "history"]}, UnknownStoreError),
        ({"ref": REF, "stores": "kv"}, UnknownStoreError),
        ({"ref": REF, "stores": []}, ResetRefusedError),
        ({"ref": None}, ResetRefusedError),
        ({"ref": None, "namespace": "ns1"}, ResetRefusedError),
        ({"ref": None, "all_sessions": True}, ResetRefusedError),
        ({"ref": REF, "all_sessions": True}, ResetRefusedError),
        ({"ref": REF, "namespace": "ns2"}, ResetRefusedError),
        (
            {"ref": None, "namespace": "ns1", "all_sessions": True, "stores": ["kv"]},
            ResetRefusedError,
        ),
        (
            {"ref": None, "namespace": "ns1", "all_sessions": True, "stores": ["kv", "nope"]},
            UnknownStoreError,
        ),
    ],
)
async def test_refused_resets_clear_nothing(populated, kwargs, error):
    everything = [await snapshot(populated, ref) for ref in (REF, *NEIGHBOURS)]
    options = dict(kwargs)  # the parameter dict is shared between backends: copy it
    ref = options.pop("ref")
    with pytest.raises(error):
        await reset(populated, ref, **options)
    assert [await snapshot(populated, ref) for ref in (REF, *NEIGHBOURS)] == everything


async def test_namespace_reset_needs_all_sessions_and_touches_only_that_namespace(populated):
    async with populated.transaction() as tx:
        await tx.kv.put(KVScope(namespace="ns1"), "shared", "k", 1)
        await tx.kv.put(KVScope(namespace="ns2"), "shared", "k", 2)
        await tx.state.create("ns1", "task-x", "agent", {"x": 1})
    other_ns = await snapshot(populated, OTHER_NS)
    result = await reset(populated, None, namespace="ns1", all_sessions=True)
    assert result.cleared == list(ALL_STORES)
    assert result.stores[0].metadata["sessions_removed"] == 3
    for ref in (REF, SIBLING, OTHER_AGENT):
        assert await snapshot(populated, ref) is None
    assert await snapshot(populated, OTHER_NS) == other_ns
    async with populated.transaction() as tx:
        assert "ns1" not in await tx.sessions.namespaces()
        assert await tx.state.list("ns1") == []
        assert await tx.kv.get(KVScope(namespace="ns1"), "shared", "k") is None
        shared = await tx.kv.get(KVScope(namespace="ns2"), "shared", "k")
        assert shared is not None and shared.value == 2
    again = await reset(populated, None, namespace="ns1", all_sessions=True)
    assert again.cleared == [] and again.missing == list(ALL_STORES)


# --- compact ----------------------------------------------------------------------------------


async def test_compact_moves_the_window_and_reports_before_and_after(store):
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        for turn in range(10):
            await tx.conversation.append(
                REF,
                f"t{turn}",
                [Message(role="user", content=f"q{turn}"), Message(role="assistant", content="a")],
            )
    result = await compact(
        store, REF, CompactionRequest(strategy="summarize", max_messages=4), counter=COUNTER
    )
    assert result.operation == "compact" and result.compacted == ["conversation"]
    meta = result.stores[0].metadata
    assert meta["before"]["window_messages"] == 20 and meta["before"]["has_summary"] is False
    assert meta["after"]["window_messages"] == meta["messages_after"] < 20
    assert meta["after"]["has_summary"] is True and meta["changed"] is True
    assert meta["after"]["window_start_seq"] == meta["window_start"] > 1
    described = (await describe(store, REF)).store("conversation")
    assert described is not None and described.items == 20  # compaction never deletes
    assert described.metadata["window_start_seq"] == meta["window_start"]


async def test_compact_of_missing_session_reports_missing(store):
    result = await compact(store, REF, CompactionRequest(), counter=COUNTER)
    assert result.missing == ["conversation"] and result.compacted == []


# --- sweep ------------------------------------------------------------------------------------


async def test_sweep_removes_idle_sessions_and_expired_keys_only(store):
    await populate(store, REF)  # ttl 3600
    async with store.transaction() as tx:
        await tx.sessions.ensure(SIBLING, ttl_seconds=7 * 24 * 3600)
        await tx.kv.put(SIBLING.kv_scope, "cache", "short", 1, ttl_seconds=60)
        await tx.kv.put(SIBLING.kv_scope, "cache", "long", 1)
        now = tx.now
    nothing = await sweep(store, now=now + timedelta(seconds=30))
    assert nothing.sessions == [] and nothing.kv_keys == 0
    report = await sweep(store, now=now + timedelta(hours=2))
    assert report.sessions == [REF] and report.kv_keys == 1
    assert await snapshot(store, REF) is None
    async with store.transaction() as tx:
        assert await tx.state.get(REF.namespace, REF.session_id, REF.agent_id) is None
        assert await tx.sessions.get(SIBLING) is not None
        assert (await tx.kv.list_keys(SIBLING.kv_scope, "cache")).keys == ["long"]
