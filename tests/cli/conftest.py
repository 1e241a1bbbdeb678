"""The real ``statecore`` program, run as a subprocess against a real dev server and worker.

The worker runs in the test's event loop, so the program is started with asyncio's
subprocess API: a blocking ``subprocess.run`` would stall the worker it is talking to.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.temporal.conftest import Env, dev_server, running_env  # noqa: F401  (fixture)
from tests.worker_cli import empty_config_home

ROOT = Path(__file__).resolve().parents[2]
STATECORE = str(Path(sys.executable).parent / "statecore")


@dataclass
class Done:
    """A finished run of the program."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    def error(self) -> dict[str, Any]:
        """The ``--json`` error document on stderr."""
        return json.loads(self.err)["error"]


def cli_environment() -> dict[str, str]:
    """The test's environment minus anything that would point the program elsewhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "STATECORE_"))}
    env["PYTHONPATH"] = str(ROOT)
    env["XDG_CONFIG_HOME"] = empty_config_home()  # no developer's temporal.toml either
    return env


async def statecore(
    *args: str,
    stdin: str | None = None,
    within: float = 120.0,
    env: dict[str, str] | None = None,
) -> Done:
    """Run ``statecore ARGS`` to completion (``env``: variables added to its environment)."""
    proc = await asyncio.create_subprocess_exec(
        STATECORE,
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**cli_environment(), **(env or {})},
        cwd=ROOT,
    )
    try:
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), within
        )
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


def assert_one_line_error(done: Done, code: int) -> None:
    """The documented exit code and one line on stderr, never a traceback."""
    assert done.code == code, (done.code, done.out, done.err)
    assert "Traceback" not in done.err
    assert len(done.err.strip().splitlines()) == 1, done.err


@dataclass
class CliEnv:
    """A worker on a fresh task queue and SQLite database, and the options that reach it."""

    env: Env
    server: DevServer

    @property
    def agent(self) -> str:
        return self.env.agent

    @property
    def options(self) -> list[str]:
        return [
            "--address",
            self.server.address,
            "--task-queue",
            self.env.task_queue,
            "--database-url",
            self.env.database_url,
        ]

    async def run(self, *args: str, stdin: str | None = None, within: float = 120.0) -> Done:
        return await statecore(*self.options, *args, stdin=stdin, within=within)


@pytest.fixture(scope="module")
async def cli(dev_server: DevServer) -> AsyncIterator[CliEnv]:  # noqa: F811
    """One worker for the whole module (each test uses its own session ids)."""
    async with fresh_database("sqlite", "cli") as url, running_env(dev_server, url) as env:
        yield CliEnv(env=env, server=dev_server)


async def eventually(check: Any, *, within: float = 20.0, every: float = 0.3) -> Any:
    """Await ``check()`` until it returns something truthy (visibility and signals are
    asynchronous); fails with the last value when time runs out."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await check()
        if value:
            return value
        assert loop.time() < deadline, f"condition not met within {within}s: {value!r}"
        await asyncio.sleep(every)
