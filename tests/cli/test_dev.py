"""``statecore dev``: its own dev server and worker, answering turns, stopping cleanly."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from statecore.temporal._devserver import free_port
from tests.cli.conftest import ROOT, STATECORE, cli_environment, eventually, statecore

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def test_dev_runs_a_server_and_worker_until_interrupted(tmp_path: Path) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    database = tmp_path / "dev.db"
    common = ["--task-queue", "dev-q", "--database-url", f"sqlite:///{database}"]
    log = (tmp_path / "dev.log").open("wb")  # a pipe nobody reads could fill and block it
    dev = await asyncio.create_subprocess_exec(
        STATECORE,
        "dev",
        "--port",
        str(port),
        "--ui-port",
        "0",
        "--data-dir",
        str(tmp_path / "data"),
        *common,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=log,
        env=cli_environment(),
        cwd=ROOT,
        start_new_session=True,
    )
    try:

        async def answered() -> dict | None:
            done = await statecore(
                "--address", address, *common, "--json", "chat", "a", "s", stdin="hello\n"
            )
            return done.json_lines()[0] if done.code == 0 else None

        first = await eventually(answered, within=90, every=1.0)
        assert first["turn"] == 1 and 'You said: "hello"' in first["reply"]["content"]
        assert (tmp_path / "data" / "temporal.db").exists()  # the server keeps its state there
        stored = await statecore(*common, "--json", "describe", "--db", "a", "s")
        assert stored.code == 0, stored.err

        dev.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(dev.wait(), 60) == 0
        gone = await statecore("--address", address, "sessions", "list")
        assert gone.code == 5, "the dev server outlived `statecore dev`"
    finally:
        if dev.returncode is None:
            # SIGTERM lets `statecore dev` stop its server too; kill only if it hangs.
            dev.terminate()
            try:
                await asyncio.wait_for(dev.wait(), 30)
            except TimeoutError:
                dev.kill()
                await dev.wait()
        log.close()
