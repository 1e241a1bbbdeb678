"""The SDK's human-in-the-loop scenario (``examples/memory/hitl_session_scenario.py``), its
own steps driven with StatecoreSession where it uses its ``FileSession``: a tool approved, a
new session built on the same id to go on ("rehydrated"), a tool rejected. Compared with the
same steps on ``FileSession``: same output, same model requests, same items after each step;
on ``memory://`` too, where the rehydrated session must see the first one's items.

The scenario's own entry point cannot be swapped as it stands: it asks ``FileSession`` for
``get_session_id()``, which only that class has, and its second half runs on
``OpenAIConversationsSession`` (history kept by OpenAI's Conversations API); see
docs/openai_agents.md.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import OpenAIResponsesModel, set_tracing_disabled
from openai import AsyncOpenAI

from statecore.integrations.openai_agents import StatecoreSession
from tests.dbs import fresh_database
from tests.integrations.openai_agents.responses_api import ResponsesAPI
from tests.integrations.openai_agents.sdk_examples import VENDOR

set_tracing_disabled(True)

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(scope="module")
def scenario() -> Iterator[Any]:
    """The scenario module, imported from the unpacked sdist."""
    if not (VENDOR / "examples" / "memory").is_dir():
        pytest.fail(f"{VENDOR}/examples is missing: run `bash scripts/setup.sh test`")
    sys.path.insert(0, str(VENDOR))
    try:
        yield importlib.import_module("examples.memory.hitl_session_scenario")
    finally:
        sys.path.remove(str(VENDOR))


@pytest.fixture(params=BACKENDS)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    if request.param == "memory":
        yield "memory://"
        return
    async with fresh_database(request.param, "oaihitl") as url:
        yield url


async def play(scenario: Any, make_session: Callable[[], Any]) -> tuple[str, Any, list[Any]]:
    """The scenario's three steps: the first on one session, the others on a new session
    for the same id. Returns what it printed, the model requests and the items per step."""
    api = ResponsesAPI().start()
    client = AsyncOpenAI(base_url=api.base_url, api_key="offline", max_retries=0)
    model = OpenAIResponsesModel(model="gpt-5.6-sol", openai_client=client)
    messages = scenario.USER_MESSAGES
    steps = [
        scenario.ScenarioStep(
            name=name,
            message=message,
            tool_name=tool,
            approval=approval,
            expected_output=(
                scenario.REJECTION_OUTPUT
                if approval == "reject"
                else scenario.tool_output_for(tool, message)
            ),
        )
        for name, message, tool, approval in [
            ("turn 1", messages[0], scenario.TOOL_ECHO, "approve"),
            ("turn 2 (rehydrated)", messages[1], scenario.TOOL_NOTE, "approve"),
            ("turn 3 (rejected)", messages[2], scenario.TOOL_ECHO, "reject"),
        ]
    ]
    printed = io.StringIO()
    items = []
    try:
        session = make_session()
        with contextlib.redirect_stdout(printed):
            await scenario.run_scenario_step(session, "session turn 1", steps[0], model=model)
            items.append(await session.get_items())
            rehydrated = make_session()
            for step in steps[1:]:
                await scenario.run_scenario_step(
                    rehydrated, f"session {step.name}", step, model=model
                )
                items.append(await rehydrated.get_items())
    finally:
        api.stop()
        await client.close()
    return printed.getvalue(), api.requests, items


async def test_the_scenario_behaves_the_same_on_statecore(
    scenario: Any, url: str, tmp_path: Path
) -> None:
    expected = await play(
        scenario, lambda: scenario.FileSession(dir=tmp_path, session_id="scenario")
    )
    session_id = f"scenario-{uuid.uuid4().hex[:8]}"
    opened: list[StatecoreSession] = []

    def statecore() -> StatecoreSession:
        opened.append(StatecoreSession(session_id, database_url=url))
        return opened[-1]

    try:
        got = await play(scenario, statecore)
    finally:
        for session in opened:
            await session.close()
    assert got[0] == expected[0]
    assert got[1] == expected[1]
    assert got[2] == expected[2]
    # An approval, a rehydration and a rejection all happened.
    assert "approved_note:" in got[0] and scenario.REJECTION_OUTPUT in str(got[2][-1])
