"""The second process of human-in-the-loop runs: it resumes each ``RunState`` saved as JSON by
another process, approves the pending tool calls and finishes the run on a session built
afresh. ``python resume_run_state.py <jobs.json>``, where each job is ``{"state_file",
"base_url", "kind": "sdk" | "statecore", "where": <SQLite path | database URL>,
"session_id"}``; it prints a JSON list with each run's final output and session items."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    OpenAIResponsesModel,
    Runner,
    RunState,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

set_tracing_disabled(True)


@function_tool(needs_approval=True)
def get_weather(location: str) -> str:
    """The weather in a place."""
    return f"Sunny in {location}"


def build_agent(base_url: str) -> Agent[Any]:
    client = AsyncOpenAI(base_url=base_url, api_key="offline", max_retries=0)
    return Agent(
        name="HITL Assistant",
        instructions="Use the tools.",
        tools=[get_weather],
        model=OpenAIResponsesModel(model="gpt-4.1", openai_client=client),
    )


def build_session(kind: str, where: str, session_id: str) -> Any:
    if kind == "sdk":
        return SQLiteSession(session_id, db_path=where)
    from statecore.integrations.openai_agents import StatecoreSession

    return StatecoreSession(session_id, database_url=where)


async def resume(job: dict[str, str]) -> dict[str, Any]:
    agent = build_agent(job["base_url"])
    session = build_session(job["kind"], job["where"], job["session_id"])
    state = await RunState.from_json(agent, json.loads(Path(job["state_file"]).read_text()))
    for interruption in state.get_interruptions():
        state.approve(interruption)
    result = await Runner.run(agent, state, session=session)
    items = await session.get_items()
    session.close()  # without await, as code written for SQLiteSession closes it
    return {"final_output": result.final_output, "items": items}


async def resume_all(jobs: list[dict[str, str]]) -> None:
    print(json.dumps([await resume(job) for job in jobs], default=str))


if __name__ == "__main__":
    asyncio.run(resume_all(json.loads(Path(sys.argv[1]).read_text())))
