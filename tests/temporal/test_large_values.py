"""Large payloads by reference against a real dev server, on SQLite, PostgreSQL and MariaDB:
any workflow with ``StatecoreBlobPlugin``, statecore's AgentSession with
``StatecorePlugin(blob_threshold_bytes=...)``, replay with the driver on (of histories
recorded with it and without it), and the sweep's retention rule."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from temporalio import activity, workflow
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer, Worker

from statecore.agent_session import WORKFLOWS
from statecore.contract._session import workflow_id_for
from statecore.core._errors import StateTooLargeError
from statecore.core._limits import MAX_INLINE_VALUE_BYTES, MAX_KV_VALUE_BYTES, MAX_STATE_BYTES
from statecore.core._models import SessionRef
from statecore.errors import from_failure
from statecore.store import open_store
from statecore.store._inputs import encode_state
from statecore.store._migrate import upgrade_database
from statecore.store.sql._schema import blob_refs, blobs
from statecore.temporal._blob_driver import (
    StatecoreBlobPlugin,
    sweep_blobs,
    with_blob_storage,
)
from statecore.temporal._devserver import DevServer
from statecore.temporal._plugin import workflow_runner
from tests.catalog.turn_api_workflow import CatalogAgent
from tests.dbs import fresh_database
from tests.store.migration_helpers import ALL
from tests.temporal.conftest import HISTORIES, Env, running_env

pytestmark = pytest.mark.temporal

THRESHOLD = 64 * 1024


@activity.defn(name="blobs_test.make_text")
async def make_text(size: int) -> str:
    return ("large value " * (size // 12 + 1))[:size]


@activity.defn(name="blobs_test.digest_of")
async def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@workflow.defn(name="BlobsTestWorkflow")
class BlobsTestWorkflow:
    """An ordinary workflow, nothing of statecore in it: a 1 MB value made by one activity and
    handed to another."""

    @workflow.run
    async def run(self, size: int) -> str:
        text = await workflow.execute_activity(
            make_text, size, start_to_close_timeout=timedelta(seconds=30)
        )
        return await workflow.execute_activity(
            digest_of, text, start_to_close_timeout=timedelta(seconds=30)
        )


def _history_bytes(history: WorkflowHistory) -> int:
    return sum(event.ByteSize() for event in history.events)


async def _blob_counts(url: str, workflow_id: str | None = None) -> tuple[int, int]:
    from statecore.store.sql._engine import create_store_engine

    engine = create_store_engine(url)
    try:
        async with engine.connect() as conn:
            n_blobs = await conn.scalar(select(func.count()).select_from(blobs))
            refs = select(func.count()).select_from(blob_refs)
            if workflow_id is not None:
                refs = refs.where(blob_refs.c.target_id == workflow_id)
            n_refs = await conn.scalar(refs)
    finally:
        await engine.dispose()
    return int(n_blobs or 0), int(n_refs or 0)


@pytest.fixture(params=ALL)
async def database(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "lv") as url:
        await upgrade_database(url)
        yield url


async def _run_plain(
    client: Client, queue: str, workflow_id: str, size: int = 1_000_000
) -> WorkflowHistory:
    handle = await client.start_workflow(
        BlobsTestWorkflow.run,
        size,
        id=workflow_id,
        task_queue=queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )
    result = await asyncio.wait_for(handle.result(), timeout=60)  # two activities
    assert result == hashlib.sha256((await make_text(size)).encode()).hexdigest()
    return await handle.fetch_history()


async def test_any_workflow_keeps_claims_in_history_with_the_blob_plugin(
    dev_server: DevServer, database: str
) -> None:
    plugin = StatecoreBlobPlugin(database, threshold_bytes=THRESHOLD)
    client = await Client.connect(
        dev_server.address, data_converter=pydantic_data_converter, plugins=[plugin]
    )
    queue = f"lv-{uuid.uuid4().hex[:8]}"
    workflow_id = f"lv-any-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=queue, workflows=[BlobsTestWorkflow], activities=[make_text, digest_of]
    ):
        history = await _run_plain(client, queue, workflow_id)
        # The 1 MB value crossed history twice (a result, then an input): both are claims.
        assert _history_bytes(history) < 20_000
        # One blob (the same bytes both times), referenced by this workflow's run.
        assert await _blob_counts(database, workflow_id) == (1, 1)

        # A worker with the driver replays the history, which reads the blob back.
        replayer = Replayer(workflows=[BlobsTestWorkflow], data_converter=client.data_converter)
        await replayer.replay_workflow(history, raise_on_replay_failure=True)

    # Without the plugin the same workflow's history holds the value itself, twice.
    bare = await Client.connect(dev_server.address, data_converter=pydantic_data_converter)
    async with Worker(
        bare, task_queue=queue, workflows=[BlobsTestWorkflow], activities=[make_text, digest_of]
    ):
        inline = await _run_plain(bare, queue, f"lv-bare-{uuid.uuid4().hex[:8]}")
    assert _history_bytes(inline) > 2_000_000


async def test_agent_session_turns_with_large_messages_store_them_by_reference(
    dev_server: DevServer, database: str
) -> None:
    async with running_env(dev_server, database, blob_threshold_bytes=THRESHOLD) as env:
        session = f"s-{uuid.uuid4().hex[:8]}"
        big = "a long pasted document line\n" * 8_000  # 216 KB
        first = await env.sessions.send(env.agent, session, big)
        second = await env.sessions.send(env.agent, session, "and a short follow-up")
        assert first.reply and second.reply
        workflow_id = workflow_id_for(env.agent, session)
        history = await env.client.get_workflow_handle(workflow_id).fetch_history()
        n_blobs, n_refs = await _blob_counts(database, workflow_id)
        assert n_blobs >= 1 and n_refs >= 1
        # The 216 KB message would be in history at least once (the update's request);
        # with the driver it is a claim.
        assert _history_bytes(history) < 100_000


@pytest.mark.parametrize("path", sorted(HISTORIES.glob("turns-*.json"))[:1], ids=lambda p: p.stem)
async def test_a_worker_with_the_driver_replays_histories_recorded_without_it(
    path: Path, tmp_path: Path
) -> None:
    from statecore.temporal._blob_driver import StatecoreBlobDriver
    from statecore.temporal._converter import adjust_data_converter

    url = f"sqlite+aiosqlite:///{tmp_path / 'replay.db'}"
    await upgrade_database(url)
    driver = StatecoreBlobDriver(url)
    try:
        converter = with_blob_storage(adjust_data_converter(None), driver, threshold_bytes=0)
        history = WorkflowHistory.from_json("replay", json.loads(path.read_text()))
        replayer = Replayer(
            workflows=WORKFLOWS, data_converter=converter, workflow_runner=workflow_runner()
        )
        result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None
    finally:
        await driver.close()


async def _delete_execution(client: Client, workflow_id: str) -> None:
    """Delete a closed workflow's history (what the namespace's retention does when it ends)
    and wait, at most 120 s, until the server no longer finds it: the dev server deletes in a
    system workflow of its own, which took over 30 s on a loaded machine."""
    await client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution={"workflow_id": workflow_id},
        )
    )
    for _ in range(1200):
        try:
            await client.get_workflow_handle(workflow_id).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return
            raise
        await asyncio.sleep(0.1)
    raise AssertionError(f"workflow {workflow_id} still found 120 s after its deletion")


async def test_the_sweep_keeps_what_a_history_can_still_reference(
    dev_server: DevServer, database: str
) -> None:
    plugin = StatecoreBlobPlugin(database, threshold_bytes=THRESHOLD)
    client = await Client.connect(
        dev_server.address, data_converter=pydantic_data_converter, plugins=[plugin]
    )
    queue = f"lv-{uuid.uuid4().hex[:8]}"
    kept_id, gone_id, shared_id = (f"lv-{uuid.uuid4().hex[:8]}" for _ in range(3))
    async with Worker(
        client, task_queue=queue, workflows=[BlobsTestWorkflow], activities=[make_text, digest_of]
    ):
        kept = await _run_plain(client, queue, kept_id, 1_000_000)
        # The same 1 MB value (one blob for two workflows), and one of its own (another blob).
        await _run_plain(client, queue, shared_id, 1_000_000)
        await _run_plain(client, queue, gone_id, 900_000)
    table = plugin.driver.table
    assert (await table.totals())[0] == 2

    # All three closed but their histories are kept (the namespace's retention): nothing
    # goes, even with no grace period.
    report = await sweep_blobs(client, table, grace_seconds=0)
    assert (report.checked, report.gone, report.blobs_deleted) == (3, 0, 0)
    # Within the grace period nothing is even asked about.
    assert (await sweep_blobs(client, table)).checked == 0

    # Two histories are deleted: the blob only they referenced goes, the one the kept
    # workflow references too stays.
    await _delete_execution(client, gone_id)
    await _delete_execution(client, shared_id)
    dry = await sweep_blobs(client, table, grace_seconds=0, dry_run=True)
    assert (dry.gone, dry.blobs_deleted) == (2, 0)
    assert (await table.totals())[0] == 2
    report = await sweep_blobs(client, table, grace_seconds=0)
    assert (report.gone, report.references_deleted, report.blobs_deleted) == (2, 2, 1)
    assert report.bytes_freed > 0
    assert (await table.totals())[0] == 1
    assert await _blob_counts(database, gone_id) == (1, 0)

    # The recorded history of the kept workflow replays after the sweep.
    replayer = Replayer(workflows=[BlobsTestWorkflow], data_converter=client.data_converter)
    await replayer.replay_workflow(kept, raise_on_replay_failure=True)
    await plugin.driver.close()


# --- statecore's own large values through the turn API ----------------------------------------


async def _start_catalog(env: Env, session_id: str) -> Any:
    ref = SessionRef(agent_id=env.agent, session_id=session_id)
    return await env.client.start_workflow(
        "CatalogAgent", ref, id=f"lv:{env.agent}:{session_id}", task_queue=env.task_queue
    )


async def test_a_turn_reads_and_updates_a_16_mib_document(
    dev_server: DevServer, database: str
) -> None:
    async with running_env(
        dev_server, database, blob_threshold_bytes=THRESHOLD, extra_workflows=[CatalogAgent]
    ) as env:
        handle = await _start_catalog(env, "big")
        overhead = len(encode_state({"text": "", "turns": 0}).encode())
        size = MAX_STATE_BYTES - overhead  # the document is exactly at the limit
        for number in (1, 2, 3):
            # Each turn reads the whole document (turn.state.get) and writes a new one of
            # 16 MiB; 120 s each at most on a shared machine.
            request = {"turn_id": f"t{number}", "notes_size": size, "commit_only": True}
            turn = await asyncio.wait_for(
                handle.execute_update("turn", request, result_type=int), 120
            )
            assert turn == number
        history = await handle.fetch_history()
        # Two 16 MiB reads and three 16 MiB writes; history holds claims of ~200 bytes.
        assert _history_bytes(history) < 100_000
        store = await open_store(database)
        try:
            async with store.transaction() as tx:
                found = await tx.state.get("default", "big", env.agent)
        finally:
            await store.close()
        assert found is not None
        assert found.state["turns"] == 3 and len(found.state["text"]) == size
        # A 16 MiB KV value goes the same way.
        value = {"bucket": "files", "key": "big", "bytes_size": MAX_KV_VALUE_BYTES}
        request = {"turn_id": "kv", "kv": [value], "commit_only": True}
        assert (
            await asyncio.wait_for(handle.execute_update("turn", request, result_type=int), 120)
            == 4
        )


async def test_without_blob_storage_a_turn_refuses_a_large_read_with_a_typed_error(
    dev_server: DevServer, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'inline.db'}"
    async with running_env(dev_server, url, extra_workflows=[CatalogAgent]) as env:
        handle = await _start_catalog(env, "inline")
        size = MAX_INLINE_VALUE_BYTES + 1
        # Writing 1 MiB + 1 works (the commit's input never reaches history) ...
        request = {"turn_id": "w", "notes_size": size, "commit_only": True}
        assert (
            await asyncio.wait_for(handle.execute_update("turn", request, result_type=int), 60) == 1
        )
        # ... reading it back would put it in history: refused, naming the switch.
        request = {"turn_id": "r", "notes_size": 1, "commit_only": True}
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await asyncio.wait_for(handle.execute_update("turn", request, result_type=int), 60)
        error = from_failure(caught.value)
        assert isinstance(error, StateTooLargeError), caught.value
        assert "blob_threshold_bytes" in error.message
