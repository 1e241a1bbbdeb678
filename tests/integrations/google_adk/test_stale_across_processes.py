"""Two processes load one session and append at the same moment: statecore stores exactly one
event of each round and refuses the other with ADK's StaleSessionError, on every SQL
backend."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from statecore.integrations.google_adk import StatecoreSessionService
from tests.dbs import fresh_database

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

ROUNDS = 4
#: The longest a writer process may take to start and load, or to append.
STEP_TIMEOUT_SECONDS = 90.0


@asynccontextmanager
async def database(kind: str, tmp_path: Path) -> AsyncIterator[str]:
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'race.db'}"
        return
    async with fresh_database({"postgres": "postgresql", "mariadb": "mysql"}[kind], "race") as url:
        yield url


async def read_line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), STEP_TIMEOUT_SECONDS)
    if not line:
        assert proc.stderr is not None
        raise AssertionError((await proc.stderr.read()).decode())
    return line.decode().strip()


@pytest.mark.parametrize(
    "kind",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mariadb),
    ],
)
async def test_racing_processes(kind: str, tmp_path: Path) -> None:
    async with database(kind, tmp_path) as url:
        service = StatecoreSessionService(database_url=url)
        try:
            session = await service.create_session(app_name="race_app", user_id="u1")
            go = tmp_path / "go"
            procs = [
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "tests.integrations.google_adk.stale_writer_process",
                    *(url, "race_app", session.id, str(go), str(ROUNDS), f"writer{n}"),
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                for n in range(2)
            ]
            outcomes: list[str] = []
            try:
                for round_ in range(ROUNDS):
                    for proc in procs:
                        assert await read_line(proc) == "loaded"
                    Path(f"{go}-{round_}").touch()
                    round_outcomes = sorted([await read_line(p) for p in procs])
                    assert round_outcomes == ["stale", "stored"], round_
                    outcomes += round_outcomes
                for proc in procs:
                    assert await asyncio.wait_for(proc.wait(), STEP_TIMEOUT_SECONDS) == 0
            finally:
                for proc in procs:
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
            stored = await service.get_session(
                app_name="race_app", user_id="u1", session_id=session.id
            )
        finally:
            await service.close()
    assert stored is not None
    assert len(stored.events) == ROUNDS
