"""A program that ends on a typed error exits with it, never with an abort.

Ended by an uncaught InvalidIdentifierError from ``send``, a program's connected Temporal
client lived on in the exception's traceback until interpreter teardown, where its native
side could abort the process (``Fatal Python error: PyGILState_Release``, exit 134) in about
one run of six (3 of 20 in a measurement without statecore.temporal._exit_guard). The program
is run RUNS times; each must exit 1 with the typed error's traceback and nothing after it.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from statecore.temporal._devserver import DevServer
from tests.worker_cli import REPO, base_env

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

#: At one abort in six, all 16 runs pass by chance 5% of the time.
RUNS = 16
AT_ONCE = 2

PROGRAM = """\
import asyncio
import os

from temporalio.client import Client

from statecore import AgentSessionClient, StatecorePlugin


async def main() -> None:
    plugin = StatecorePlugin(database_url=os.environ["STATECORE_DATABASE_URL"])
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"], plugins=[plugin])
    sessions = AgentSessionClient(client, task_queue="exit-after-typed-error")
    await sessions.send("support-bot", "customer 42", "Where is my order?")  # a space: refused


asyncio.run(main())
"""


async def _run(script: Path, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        cwd=script.parent,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


async def test_a_program_ended_by_a_typed_error_never_aborts(
    dev_server: DevServer, tmp_path: Path
) -> None:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = {
        **base_env(),
        "PYTHONPATH": str(REPO),
        "TEMPORAL_ADDRESS": dev_server.address,
        "STATECORE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'app.db'}",
    }
    gate = asyncio.Semaphore(AT_ONCE)

    async def one() -> tuple[int, str]:
        async with gate:
            return await _run(script, env)

    results = await asyncio.gather(*(one() for _ in range(RUNS)))
    aborted = [out for code, out in results if code != 1 or "Fatal Python error" in out]
    assert not aborted, f"{len(aborted)} of {RUNS} runs did not exit 1:\n{aborted[0][-2000:]}"
    for _, out in results:
        last = out.strip().splitlines()[-1]
        assert last.startswith("statecore.core._errors.InvalidIdentifierError: session_id"), out
