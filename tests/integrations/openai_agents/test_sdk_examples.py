"""The OpenAI Agents SDK's session examples run with only the session's construction changed
to StatecoreSession (``sdk_examples.SWAPS``), on SQLite and PostgreSQL, and do what they do
on the SDK's own session: the same output, the same requests to the model API (so the same
history sent), and the same items in the session after every run.

Examples that cannot be swapped this way are listed in docs/openai_agents.md with the reason.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from statecore.integrations.openai_agents import StatecoreSession
from tests.dbs import fresh_database
from tests.integrations.openai_agents.responses_api import ResponsesAPI
from tests.integrations.openai_agents.sdk_examples import SWAPS, VENDOR, Run, run_example

DIALECTS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
]
#: The examples whose session is a StatecoreSession itself (not wrapped), and its id: the
#: test reads the database afterwards with a session of its own.
PLAIN_SESSION_IDS = {
    "sqlite_session_example": "conversation_123",
    "sqlalchemy_session_example": "conversation_123",
    "memory_session_hitl_example": "memory-session",
}


#: One example runs at a time in a process (run_example changes the working directory).
_one_at_a_time = threading.Lock()
#: The example on the SDK's own session, the same for every backend: run once per process.
_as_shipped: dict[str, Run] = {}


@pytest.fixture(scope="module")
def api() -> Iterator[ResponsesAPI]:
    server = ResponsesAPI().start()
    try:
        yield server
    finally:
        server.stop()


def run_both(name: str, workdir: Path, api: ResponsesAPI, url: str) -> tuple[Run, Run]:
    with _one_at_a_time:
        if name not in _as_shipped:
            _as_shipped[name] = run_example(
                name, Path(tempfile.mkdtemp(prefix=f"sdk-{name}-")), api
            )
        return _as_shipped[name], run_example(name, workdir, api, url)


@pytest.mark.slow
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(SWAPS))
async def test_the_example_behaves_the_same_on_statecore(
    name: str, dialect: str, tmp_path: Path, api: ResponsesAPI
) -> None:
    if not (VENDOR / "examples" / "memory").is_dir():
        pytest.fail(f"{VENDOR}/examples is missing: run `bash scripts/setup.sh test`")
    async with fresh_database(dialect, "oaiexample") as url:
        expected, got = await asyncio.to_thread(run_both, name, tmp_path, api, url)
        assert got.stdout == expected.stdout
        assert got.requests == expected.requests
        assert got.items == expected.items
        assert len(got.items) >= 1
        assert not [w for w in got.warnings if "never awaited" in w], got.warnings
        session_id = PLAIN_SESSION_IDS.get(name)
        if session_id is not None:
            # What the example left is in the database, for any later process to read.
            stored = StatecoreSession(session_id, database_url=url)
            try:
                assert await stored.get_items() == got.items[-1]
            finally:
                await stored.close()
