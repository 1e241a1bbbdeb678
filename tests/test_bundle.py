"""Export, import and fork of sessions and namespaces; the bundle file's integrity checks."""

from __future__ import annotations

import hashlib
import json
import logging

import pytest

from statecore.core._errors import (
    AlreadyExistsError,
    BundleError,
    NotFoundError,
    SessionNotFoundError,
)
from statecore.core._models import ALL_STORES, KVScope, Message, SessionRef
from statecore.operations._bundle_format import canonical_json
from statecore.operations._bundles import (
    NamespaceBundle,
    SessionBundle,
    dump_bundle,
    export_namespace,
    export_session,
    fork_session,
    import_namespace,
    import_session,
    load_bundle,
)
from statecore.operations._control_plane import describe
from statecore.operations._turn_commit import find_turn
from statecore.store._migrate import upgrade_database
from statecore.store._tool_and_task_buckets import TaskSlots
from statecore.store.sql import SqlStateStore
from tests.session_data import populate, snapshot
from tests.store.helpers import hold_write_lock
from tests.store_backends import BACKENDS, open_backend

REF = SessionRef(namespace="ns1", agent_id="agent", session_id="s1")
SIBLING = SessionRef(namespace="ns1", agent_id="agent", session_id="s2")
TARGET = SessionRef(namespace="ns9", agent_id="agent9", session_id="copy")


@pytest.fixture(params=BACKENDS)
async def store(request, tmp_path):
    async with open_backend(request.param, tmp_path, "source") as store:
        yield store


@pytest.fixture(params=BACKENDS)
async def target_store(request, tmp_path):
    async with open_backend(request.param, tmp_path, "target") as store:
        yield store


def _content(bundle: SessionBundle | NamespaceBundle) -> dict:
    """The bundle without its export times (the namespace's and each nested session's)."""
    exclude: dict = {"exported_at": True}
    if isinstance(bundle, NamespaceBundle):
        exclude["sessions"] = {"__all__": {"exported_at"}}
    return bundle.model_dump(mode="json", exclude=exclude)


def _rewrite(data: bytes, change) -> bytes:
    """Apply ``change`` to the content and re-sign it, as a careless tool would."""
    envelope = json.loads(data)
    change(envelope["content"])
    envelope["sha256"] = hashlib.sha256(canonical_json(envelope["content"])).hexdigest()
    return canonical_json(envelope)


# --- round trips ------------------------------------------------------------------------------


async def test_session_round_trip_between_backends(store, target_store):
    await populate(store, REF)
    exported = await export_session(store, REF)
    assert exported.format == "statecore.session" and exported.schema_version == 2
    assert len(exported.messages) == 6 and len(exported.flows) == 3
    assert {e.bucket for e in exported.kv} == {
        "prefs",
        "blobs",
        "tool.search",
        "task.records",
        "turn.meta",
    }
    # Turn records travel, so a re-sent turn id stays deduplicated after import.
    assert [(t.turn_id, t.record) for t in exported.turns] == [
        ("turn-0", [1]),
        ("turn-1", [2]),
        ("turn-2", [3]),
    ]
    data = dump_bundle(exported)
    loaded = load_bundle(data)
    assert loaded == exported
    result = await import_session(target_store, loaded)
    assert result.operation == "import" and result.cleared == []
    assert [s.name for s in result.stores if s.exists] == list(ALL_STORES)
    assert _content(await export_session(target_store, REF)) == _content(exported)
    # The imported log continues where the source left off.
    async with target_store.transaction() as tx:
        more = await tx.conversation.append(REF, "next", [Message(role="user", content="more")])
    assert (
        more[0].seq == 7
        and more[0].cumulative_tokens == exported.messages[-1].cumulative_tokens + more[0].tokens
    )


async def test_dump_is_canonical_and_deterministic(store):
    await populate(store, REF)
    bundle = await export_session(store, REF)
    data = dump_bundle(bundle)
    assert dump_bundle(load_bundle(data)) == data
    assert data == canonical_json(json.loads(data))


async def test_import_into_another_ref_moves_every_store(store):
    await populate(store, REF)
    bundle = await export_session(store, REF)
    await import_session(store, bundle, target=TARGET)
    copy = await export_session(store, TARGET)
    assert copy.messages == bundle.messages and copy.kv == bundle.kv
    assert copy.state is not None and (copy.state.task_id, copy.state.agent_id) == (
        "copy",
        "agent9",
    )
    assert copy.state.state == {"step": 1}
    async with store.transaction() as tx:
        task = await TaskSlots(tx, TARGET).get("task-1")
    assert task is not None and task.state == "working"
    assert await snapshot(store, REF) == _content(bundle)


async def test_import_refuses_occupied_target_unless_replace(store):
    await populate(store, REF)
    bundle = await export_session(store, REF)
    async with store.transaction() as tx:
        await tx.sessions.ensure(TARGET)
        await tx.kv.put(TARGET.kv_scope, "prefs", "old", 1)
        await tx.state.create(TARGET.namespace, TARGET.session_id, TARGET.agent_id, {"old": 1})
    before = await snapshot(store, TARGET)
    with pytest.raises(AlreadyExistsError, match="replace=True"):
        await import_session(store, bundle, target=TARGET)
    assert await snapshot(store, TARGET) == before
    result = await import_session(store, bundle, target=TARGET, replace=True)
    assert result.cleared == ["kv", "state"]
    async with store.transaction() as tx:
        assert await tx.kv.get(TARGET.kv_scope, "prefs", "old") is None
        doc = await tx.state.get(TARGET.namespace, TARGET.session_id, TARGET.agent_id)
    assert doc is not None and doc.state == {"step": 1}


async def test_import_into_an_empty_existing_session_is_allowed(store):
    await populate(store, REF)
    bundle = await export_session(store, REF)
    async with store.transaction() as tx:
        await tx.sessions.ensure(TARGET)
    await import_session(store, bundle, target=TARGET)
    assert len((await export_session(store, TARGET)).messages) == 6


async def test_export_of_missing_session_is_not_found(store):
    with pytest.raises(SessionNotFoundError):
        await export_session(store, REF)


async def test_namespace_round_trip(store, target_store):
    await populate(store, REF)
    await populate(store, SIBLING)
    await populate(store, SessionRef(namespace="elsewhere", agent_id="a", session_id="x"))
    async with store.transaction() as tx:
        await tx.kv.put(KVScope(namespace="ns1"), "shared", "k", {"v": 1})
        await tx.state.create("ns1", "task-7", "agent", {"free": True})
    bundle = await export_namespace(store, "ns1")
    assert [s.ref for s in bundle.sessions] == [REF, SIBLING]
    assert [(s.task_id, s.agent_id) for s in bundle.states] == [("task-7", "agent")]
    loaded = load_bundle(dump_bundle(bundle))
    assert isinstance(loaded, NamespaceBundle)
    await import_namespace(target_store, loaded)
    assert _content(await export_namespace(target_store, "ns1")) == _content(bundle)
    async with target_store.transaction() as tx:
        assert await tx.sessions.namespaces() == ["ns1"]
    with pytest.raises(AlreadyExistsError):
        await import_namespace(target_store, loaded)
    renamed = await import_namespace(target_store, loaded, namespace="ns1-copy")
    assert renamed.namespace == "ns1-copy"
    copy = await export_namespace(target_store, "ns1-copy")
    assert [s.ref.namespace for s in copy.sessions] == ["ns1-copy", "ns1-copy"]
    assert copy.sessions[0].messages == bundle.sessions[0].messages


async def test_namespace_import_replace(store):
    await populate(store, REF)
    bundle = await export_namespace(store, "ns1")
    await populate(store, SIBLING)
    result = await import_namespace(store, bundle, replace=True)
    assert result.cleared == ["namespace"]
    assert [s.ref for s in (await export_namespace(store, "ns1")).sessions] == [REF]


# --- bad bundles ------------------------------------------------------------------------------


@pytest.fixture
async def good_bundle(tmp_path) -> bytes:
    async with open_backend("memory", tmp_path) as source:
        await populate(source, REF)
        return dump_bundle(await export_session(source, REF))


def _corruptions(good: bytes) -> dict[str, tuple[bytes, str]]:
    def drop_ref(content):
        del content["ref"]

    def gap(content):
        content["messages"][2]["seq"] = 9

    def tokens(content):
        content["messages"][1]["cumulative_tokens"] += 1

    def version(content):
        content["schema_version"] = 3

    def window(content):
        content["session"]["window_start_seq"] = 99

    def flows(content):
        content["flows"][1]["version"] = 5

    def bad_id(content):
        content["ref"]["agent_id"] = "../etc"

    flipped = good.replace(b"answer 1", b"answer X")
    return {
        "empty": (b"", "empty"),
        "not json": (b"PK\x03\x04 zip file", "not JSON"),
        "not utf-8": (b'{"content": "\xff\xfe"}', "not UTF-8"),
        "truncated": (good[: len(good) // 2], "truncated"),
        "truncated end": (good[:-1], "truncated"),
        "truncated in string": (good[: good.index(b"answer 1") + 3], "truncated"),
        "no envelope": (json.dumps({"messages": []}).encode(), "not a statecore bundle"),
        "wrong format": (_rewrite(good, lambda c: c.update(format="autogen.state")), "format"),
        "checksum": (flipped, "checksum mismatch"),
        "missing field": (_rewrite(good, drop_ref), "ref: Field required"),
        "seq gap": (_rewrite(good, gap), "without gaps"),
        "cumulative tokens": (_rewrite(good, tokens), "cumulative_tokens"),
        "schema version": (_rewrite(good, version), "reads schema_version 1, 2"),
        "window": (_rewrite(good, window), "window_start_seq"),
        "flow versions": (_rewrite(good, flows), "version"),
        "bad identifier": (_rewrite(good, bad_id), "agent_id"),
        "nan": (good.replace(b'"turn":1', b'"turn":NaN'), "NaN"),
    }


CORRUPTIONS = [
    "empty",
    "not json",
    "not utf-8",
    "truncated",
    "truncated end",
    "truncated in string",
    "no envelope",
    "wrong format",
    "checksum",
    "missing field",
    "seq gap",
    "cumulative tokens",
    "schema version",
    "window",
    "flow versions",
    "bad identifier",
    "nan",
]


@pytest.mark.parametrize("case", CORRUPTIONS)
async def test_bad_bundle_files_are_refused_and_the_target_is_unchanged(
    good_bundle, target_store, case
):
    data, message = _corruptions(good_bundle)[case]
    await populate(target_store, SIBLING)
    before = await snapshot(target_store, SIBLING)
    with pytest.raises(BundleError, match=message):
        await import_session(target_store, load_bundle(data))  # type: ignore[arg-type]
    assert await snapshot(target_store, SIBLING) == before
    assert await snapshot(target_store, REF) is None


async def test_every_truncation_is_refused(good_bundle):
    for cut in range(0, len(good_bundle), max(1, len(good_bundle) // 97)):
        with pytest.raises(BundleError):
            load_bundle(good_bundle[:cut])


async def test_inconsistent_bundle_object_is_refused_before_writing(store):
    await populate(store, REF)
    bundle = await export_session(store, REF)
    broken = bundle.model_copy(update={"messages": bundle.messages[1:]})
    with pytest.raises(BundleError, match="without gaps"):
        await import_session(store, broken, target=TARGET)
    future = bundle.model_copy(update={"schema_version": 3})  # no statecore wrote it yet
    with pytest.raises(BundleError, match="schema_version 1"):
        await import_session(store, future, target=TARGET)
    assert await snapshot(store, TARGET) is None


async def test_import_that_fails_midway_rolls_back(store):
    """The orchestration step is restored last; when the store refuses it, the messages,
    KV, state and flows written before it in the same transaction must vanish too."""
    await populate(store, REF)
    bundle = await export_session(store, REF)
    assert bundle.orchestration is not None
    bad = bundle.orchestration.model_copy(update={"active_step": "no spaces allowed"})
    with pytest.raises(BundleError, match="active_step"):
        await import_session(store, bundle.model_copy(update={"orchestration": bad}), target=TARGET)
    assert await snapshot(store, TARGET) is None
    assert not any(s.exists for s in (await describe(store, TARGET)).stores)


# --- fork -------------------------------------------------------------------------------------


async def test_fork_from_a_flow_checkpoint(store):
    await populate(store, REF)  # checkpoint v1 after turn 0 (seq 2), v2 after seq 4, v3 seq 6
    info = await fork_session(store, REF, "plan", 2, TARGET)
    assert info.ref == TARGET and info.last_seq == 4 and info.system_prompt == "You are terse."
    source = await export_session(store, REF)
    fork = await export_session(store, TARGET)
    assert fork.messages == source.messages[:4]
    assert [(c.version, c.step) for c in fork.flows] == [(1, "step-0"), (2, "step-1")]
    assert fork.hints == source.hints
    assert fork.summary == source.summary and fork.session.window_start_seq == 3
    assert fork.kv == [] and fork.state is None and fork.orchestration is None
    assert len(source.messages) == 6  # the source is untouched


async def test_fork_before_the_summary_drops_it_and_widens_the_window(store):
    await populate(store, REF)
    await fork_session(store, REF, "plan", 1, TARGET)
    fork = await export_session(store, TARGET)
    assert [m.seq for m in fork.messages] == [1, 2]
    assert fork.summary is not None and fork.summary.through_seq == 2
    async with store.transaction() as tx:
        await tx.conversation.set_summary(REF, "covers four", 4)
        await tx.conversation.set_window_start(REF, 5)
    other = SessionRef(namespace="ns9", agent_id="agent9", session_id="copy2")
    await fork_session(store, REF, "plan", 1, other)
    early = await export_session(store, other)
    assert early.summary is None and early.session.window_start_seq == 1


async def test_fork_refusals(store):
    await populate(store, REF)
    await populate(store, SIBLING)
    with pytest.raises(NotFoundError):
        await fork_session(store, REF, "plan", 9, TARGET)
    with pytest.raises(NotFoundError):
        await fork_session(store, REF, "no-such-flow", 1, TARGET)
    with pytest.raises(SessionNotFoundError):
        await fork_session(store, TARGET, "plan", 1, SessionRef(agent_id="a", session_id="b"))
    before = await snapshot(store, SIBLING)
    with pytest.raises(AlreadyExistsError):
        await fork_session(store, REF, "plan", 1, SIBLING)
    assert await snapshot(store, SIBLING) == before
    assert await snapshot(store, TARGET) is None


# --- across databases -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "server",
    [
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mariadb),
    ],
)
async def test_sqlite_to_server_round_trip_is_identical(tmp_path, server):
    """Export from SQLite, import into a server database, export again: the same bytes
    apart from the export time."""
    async with open_backend("sqlite", tmp_path, "origin") as sqlite:
        await populate(sqlite, REF)
        await populate(sqlite, SIBLING)
        first = await export_session(sqlite, REF)
        namespace = await export_namespace(sqlite, "ns1")
    async with open_backend(server, tmp_path, "rt") as target:
        await import_session(target, load_bundle(dump_bundle(first)))
        second = await export_session(target, REF)
        assert _content(second) == _content(first)
        assert dump_bundle(second.model_copy(update={"exported_at": first.exported_at})) == (
            dump_bundle(first)
        )
        await import_namespace(target, namespace, namespace="ns1-copy")
        copy = await export_namespace(target, "ns1-copy")
        assert [s.messages for s in copy.sessions] == [s.messages for s in namespace.sessions]
        assert [s.kv for s in copy.sessions] == [s.kv for s in namespace.sessions]


# --- transient conflicts ----------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["import_session", "import_namespace", "fork"])
async def test_imports_and_forks_run_again_when_the_database_is_busy(
    tmp_path, caplog: pytest.LogCaptureFixture, operation: str
) -> None:
    """Another writer holds SQLite's write lock past this store's busy timeout: the
    operation's transaction finds the database busy, and runs again whole once it is free."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'busy.db'}"
    await upgrade_database(url)
    holder = await SqlStateStore.connect(url)
    # Gives up on the write lock after 50 ms instead of 30 s.
    store = await SqlStateStore.connect(url, connect_args={"timeout": 0.05})
    try:
        await populate(store, REF)
        session_bundle = await export_session(store, REF)
        namespace_bundle = await export_namespace(store, REF.namespace)
        operations = {
            "import_session": lambda: import_session(store, session_bundle, target=TARGET),
            "import_namespace": lambda: import_namespace(store, namespace_bundle, namespace="ns9"),
            "fork": lambda: fork_session(store, REF, "plan", 1, TARGET),
        }
        # Shorter than the 5 default attempts' busy timeouts (5 x 50 ms) alone.
        held = await hold_write_lock(holder, 0.15)
        with caplog.at_level(logging.INFO, logger="statecore.store"):
            await operations[operation]()
        await held
        landed = REF.model_copy(update={"namespace": "ns9"})
        copied = await export_session(store, landed if operation == "import_namespace" else TARGET)
    finally:
        await holder.close()
        await store.close()
    assert any("running it again" in r.getMessage() for r in caplog.records)
    if operation == "fork":
        assert copied.messages == session_bundle.messages[: len(copied.messages)]
        assert copied.flows and copied.flows[-1].version == 1
    else:
        assert copied.messages == session_bundle.messages and copied.kv == session_bundle.kv


async def test_a_schema_1_bundle_moves_its_turn_kv_entries_into_the_turn_records(store):
    """Schema 1 bundles carried turn records as KV entries of the ``turn`` bucket, in the
    object layout; imported, they answer a re-sent turn id like records written here."""
    await populate(store, REF)
    content = json.loads(dump_bundle(await export_session(store, REF)))["content"]
    stamp = content["kv"][0]["created_at"]
    record = {
        "turn": 1,
        "first_seq": 1,
        "last_seq": 2,
        "message_count": 2,
        "token_total": content["messages"][1]["cumulative_tokens"],
        "result": {"reply_seq": 2, "usage": {"prompt_tokens": 5}, "context_tokens": 7},
    }
    old_entries = [
        {
            "bucket": "turn",
            "key": turn_id,
            "kind": "json",
            "value": value,
            "revision": 1,
            "created_at": stamp,
            "updated_at": stamp,
            "expires_at": None,
        }
        for turn_id, value in (("turn-0", record), ("turn-1", {"turn": 2}))
    ]
    content["schema_version"] = 1
    del content["turns"]
    content["kv"] = sorted(content["kv"] + old_entries, key=lambda e: (e["bucket"], e["key"]))
    digest = hashlib.sha256(canonical_json(content)).hexdigest()
    old = load_bundle(canonical_json({"content": content, "sha256": digest}))
    assert old.schema_version == 1 and old.turns == []

    await import_session(store, old, target=TARGET)
    async with store.transaction() as tx:
        assert "turn" not in await tx.kv.buckets(TARGET.kv_scope)
        # Stored the way records are written now where the array can say it all.
        assert await tx.turns.records(TARGET) == [
            ("turn-0", [1, 2, 1, record["token_total"], 0, [5, 0, 7]]),
            ("turn-1", {"turn": 2}),
        ]
        again = await find_turn(tx, TARGET, "turn-0")
    assert again is not None and again.duplicate and again.last_seq == 2
    assert again.result is not None and again.result.context_tokens == 7
    assert again.result.reply.content == "answer 0 with some more words"
    described = await describe(store, TARGET)
    assert described.stores[0].metadata["turn_records"] == 2
    # Exported again, the records travel in their own section.
    assert [t.turn_id for t in (await export_session(store, TARGET)).turns] == ["turn-0", "turn-1"]
