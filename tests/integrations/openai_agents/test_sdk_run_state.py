"""A run interrupted for a tool approval, its ``RunState`` saved as JSON, and resumed in a
second process on a session built afresh: on StatecoreSession as on the SDK's
``SQLiteSession`` (same final output, same items, same model requests), on SQLite and
PostgreSQL. The second process is ``resume_run_state.py``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import Runner, SQLiteSession

from statecore.integrations.openai_agents import StatecoreSession
from tests.dbs import fresh_database
from tests.integrations.openai_agents.responses_api import ResponsesAPI
from tests.integrations.openai_agents.resume_run_state import build_agent

SECOND_PROCESS = Path(__file__).with_name("resume_run_state.py")
#: Importing the SDK in a fresh interpreter takes seconds on a loaded machine.
SECOND_PROCESS_TIMEOUT_SECONDS = 180
QUESTION = "What's the weather in Oakland?"

DIALECTS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=DIALECTS)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "oairunstate") as url:
        yield url


async def interrupt(
    tmp_path: Path, api: ResponsesAPI, session: Any, kind: str, where: str, session_id: str
) -> tuple[dict[str, str], list[Any]]:
    """The first process's part: run until the approval, save the state as JSON. Returns the
    second process's job and the items stored so far."""
    result = await Runner.run(build_agent(api.base_url), QUESTION, session=session)
    assert [i.name for i in result.interruptions] == ["get_weather"]
    state_file = tmp_path / f"{kind}-state.json"
    state_file.write_text(json.dumps(result.to_state().to_json()))
    job = {
        "state_file": str(state_file),
        "base_url": api.base_url,
        "kind": kind,
        "where": where,
        "session_id": session_id,
    }
    return job, await session.get_items()


def second_process(tmp_path: Path, jobs: list[dict[str, str]]) -> list[dict[str, Any]]:
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    done = subprocess.run(
        [sys.executable, str(SECOND_PROCESS), str(jobs_file)],
        capture_output=True,
        text=True,
        timeout=SECOND_PROCESS_TIMEOUT_SECONDS,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "never awaited" not in done.stderr
    results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


@pytest.mark.slow
async def test_a_run_state_resumes_in_a_second_process(url: str, tmp_path: Path) -> None:
    sdk_api, statecore_api = ResponsesAPI().start(), ResponsesAPI().start()
    sdk_db = str(tmp_path / "sdk.db")
    sdk = SQLiteSession("hitl", db_path=sdk_db)
    session_id = f"hitl-{uuid.uuid4().hex[:8]}"
    session = StatecoreSession(session_id, database_url=url)
    try:
        sdk_job, sdk_before = await interrupt(tmp_path, sdk_api, sdk, "sdk", sdk_db, "hitl")
        job, before = await interrupt(
            tmp_path, statecore_api, session, "statecore", url, session_id
        )
        assert before == sdk_before
        expected, got = await asyncio.to_thread(second_process, tmp_path, [sdk_job, job])
        assert got == expected
        assert got["final_output"] == "The tool said: Sunny in Oakland"
        assert statecore_api.requests == sdk_api.requests
        # What the second process stored is what this process reads now.
        assert await session.get_items() == got["items"]
    finally:
        sdk_api.stop()
        statecore_api.stop()
        sdk.close()
        await session.close()
