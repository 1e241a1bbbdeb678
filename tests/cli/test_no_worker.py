"""A session whose task queue no worker polls: ``statecore describe`` names the queue within
seconds and exits 5, instead of waiting out ``--timeout`` for Temporal's "no poller seen"."""

from __future__ import annotations

import time
import uuid

from temporalio.client import Client

from statecore import AgentSessionClient, StatecorePlugin
from statecore.cli._exits import EXIT_UNREACHABLE
from statecore.temporal._devserver import DevServer
from tests.cli.conftest import assert_one_line_error, statecore
from tests.dbs import fresh_database


async def test_describe_of_a_session_no_worker_serves_names_its_queue_in_seconds(
    dev_server: DevServer,
) -> None:
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    async with fresh_database("sqlite", "no-worker") as url:
        client = await Client.connect(dev_server.address, plugins=[StatecorePlugin(url)])
        sessions = AgentSessionClient(client, task_queue=queue)
        handle = await sessions.start(agent, "idle")  # started, never picked up
        try:
            options = ["--address", dev_server.address, "--database-url", url]
            started = time.monotonic()
            done = await statecore(*options, "--timeout", "30", "describe", agent, "idle")
            took = time.monotonic() - started
            assert_one_line_error(done, EXIT_UNREACHABLE)
            assert f"'{queue}'" in done.err and "describe --db" in done.err, done.err
            assert took < 15, f"took {took:.1f} s"  # a few seconds plus the program's start

            as_json = await statecore(*options, "--json", "describe", agent, "idle")
            assert as_json.code == EXIT_UNREACHABLE
            assert as_json.error()["code"] == "Unreachable"
        finally:
            await handle.terminate("test finished")
