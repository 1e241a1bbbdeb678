"""One chat turn, client to SQL, checks its text and turn id and encodes its request only
where it enters and where it is stored (docs/architecture.md, "The path of one turn")."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from statecore import AgentSessionClient, StatecorePlugin
from statecore.store._migrate import upgrade_database
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.turn_checks import count_checks, files_entered

pytestmark = pytest.mark.temporal

#: What one turn sent through AgentSessionClient.send costs, at most, measured by
#: tests/turn_checks.py (before the path was shortened: text 10, turn id 7, JSON 7):
#: - text and turn id: the client's request (a bad send never opens a session), the update
#:   validator's parse (any sender may call the update; the handler reuses the parse), the
#:   store's check of what it writes (``begin_turn`` for the id, which the turn's append
#:   then trusts). The workflow hands its activities what it built from checked parts, and
#:   they decode it without scanning the text again (statecore/activities/_carried.py);
#: - JSON: two payloads carry the line, the update (encoded once in the client, its size
#:   checked on the bytes that are sent; the validator measures the payload it received)
#:   and the model call's input.
BUDGET = {"text validated": 3, "turn_id checked": 3, "JSON encodings": 2}
#: statecore files whose code one such turn runs, client to SQL, on the caller's thread and
#: the workflow's (docs/architecture.md, "The path of one turn", names the steps). A turn
#: opens a store transaction, whose every module (KV, flow, state, ...) is built with it,
#: and enters the contract of each store it writes (store/_*_contract.py) beside its backend.
MOST_FILES_ENTERED = 60


async def test_a_chat_turn_checks_its_data_at_the_edges_only(dev_server: DevServer) -> None:
    queue = f"checks-{uuid.uuid4().hex[:8]}"
    async with fresh_database("sqlite", "checks") as url:
        await upgrade_database(url)
        plugin = StatecorePlugin(url)
        client = await Client.connect(dev_server.address, plugins=[plugin])
        runner = UnsandboxedWorkflowRunner()  # one copy of each module, so all is counted
        async with Worker(client, task_queue=queue, workflow_runner=runner):
            sessions = AgentSessionClient(client, task_queue=queue)
            await sessions.send("agent", "s1", "warm the session up")
            text = f"a line seen once {uuid.uuid4().hex}"
            turn_id = f"turn-{uuid.uuid4().hex[:12]}"
            with count_checks(text, turn_id) as counts:
                result = await sessions.send("agent", "s1", text, turn_id=turn_id)
            assert result.turn == 2
    for place, n in sorted(counts.places.items()):  # type: ignore[attr-defined]
        print(n, place)
    assert all(counts[what] <= most for what, most in BUDGET.items()), dict(counts)


async def test_a_chat_turn_enters_few_files(dev_server: DevServer) -> None:
    queue = f"files-{uuid.uuid4().hex[:8]}"
    async with fresh_database("sqlite", "files") as url:
        await upgrade_database(url)
        client = await Client.connect(dev_server.address, plugins=[StatecorePlugin(url)])
        runner = UnsandboxedWorkflowRunner()
        # Workflow activations run on this one thread, which the tracer follows too.
        workflow_thread = ThreadPoolExecutor(max_workers=1)
        async with Worker(
            client,
            task_queue=queue,
            workflow_runner=runner,
            workflow_task_executor=workflow_thread,
        ):
            sessions = AgentSessionClient(client, task_queue=queue)
            session = f"s-{uuid.uuid4().hex[:8]}"  # a session of its own opens on this queue
            await sessions.send("agent", session, "warm the session up")
            async with files_entered(workflow_thread) as files:
                result = await sessions.send("agent", session, "one more line")
            assert result.turn == 2
        workflow_thread.shutdown()
    print(len(files), "files:", *sorted(files), sep="\n")
    assert len(files) <= MOST_FILES_ENTERED, sorted(files)
