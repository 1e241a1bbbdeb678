"""The benchmark's ADK agent on Temporal's official ADK integration (side a).

Runs only in the benchmark's separate environment (``.cache/venv-official-google-adk``, with
``temporalio-google-adk`` and its ``google-adk``), never in statecore's.

A chat session the way the integration runs an agent: a long-running workflow holds an ADK
``Runner`` with ADK's in-memory session service in workflow state, takes each user message in
an update and runs one invocation; the model is ``TemporalModel``, so every model call is an
activity whose input is the whole ``LlmRequest`` (the session's conversation so far). The tool
is a plain function: it runs in the workflow.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types
    from temporalio.google_adk import TemporalModel

    from bench.harness.adk_weather import INSTRUCTIONS, MODEL_NAME, get_weather

WORKFLOW_TYPE = "OfficialAdkChat"
_APP, _USER, _SESSION = "weather", "user", "chat"


@workflow.defn(name=WORKFLOW_TYPE)
class OfficialAdkChat:
    def __init__(self) -> None:
        self._closed = False
        self._service = InMemorySessionService()
        agent = LlmAgent(
            name="weather",
            model=TemporalModel(MODEL_NAME),
            instruction=INSTRUCTIONS,
            tools=[get_weather],
        )
        self._runner = Runner(app_name=_APP, agent=agent, session_service=self._service)
        self._created = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self._closed)
        return 0

    @workflow.update
    async def send_message(self, text: str) -> str:
        if not self._created:
            await self._service.create_session(app_name=_APP, user_id=_USER, session_id=_SESSION)
            self._created = True
        reply = ""
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for event in self._runner.run_async(
            user_id=_USER, session_id=_SESSION, new_message=message
        ):
            if event.is_final_response() and event.content and event.content.parts:
                reply = "".join(p.text or "" for p in event.content.parts)
        return reply

    @workflow.signal
    def close(self) -> None:
        self._closed = True
