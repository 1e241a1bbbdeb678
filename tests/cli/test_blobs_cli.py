"""``statecore blobs usage`` and ``statecore blobs sweep``, the real program against a dev
server and a session whose turns stored a large message by reference."""

from __future__ import annotations

import uuid

from statecore.contract._session import workflow_id_for
from statecore.temporal._devserver import DevServer
from tests.cli.conftest import statecore
from tests.dbs import fresh_database
from tests.temporal.conftest import running_env


async def test_usage_shows_the_session_and_sweep_keeps_its_blobs(
    dev_server: DevServer,
) -> None:
    async with (
        fresh_database("sqlite", "blobcli") as url,
        running_env(dev_server, url, blob_threshold_bytes=64 * 1024) as env,
    ):
        session = f"s-{uuid.uuid4().hex[:8]}"
        await env.sessions.send(env.agent, session, "a pasted page of text\n" * 10_000)
        options = ["--address", dev_server.address, "--database-url", url, "--json"]

        done = await statecore("blobs", "usage", *options, within=60)
        assert done.code == 0, done.err
        usage = done.json()
        assert usage["blobs"] >= 1 and usage["stored_bytes"] < usage["bytes"]
        ids = {t["workflow_id"] for t in usage["targets"]}
        assert workflow_id_for(env.agent, session) in ids

        # The session is open: its history holds the claims, so nothing is deleted.
        done = await statecore("blobs", "sweep", "--grace-seconds", "0", *options, within=60)
        assert done.code == 0, done.err
        report = done.json()
        assert report["checked"] >= 1 and report["gone"] == 0 and report["blobs_deleted"] == 0

        done = await statecore("blobs", "usage", *options[:-1], within=60)
        assert done.code == 0 and workflow_id_for(env.agent, session) in done.out
