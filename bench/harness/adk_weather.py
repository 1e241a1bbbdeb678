"""The side-by-side benchmark's ADK agent, the same on both sides: a weather agent whose model
is a deterministic ``BaseLlm`` (one ``get_weather`` call per turn, then the answer the fake
model server of the other side-by-side benchmarks gives, ``bench/harness/fake_openai_server.py``).

Imported in statecore's environment and in the official integration's
(``.cache/venv-official-google-adk``): it needs only ``google-adk``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.models.registry import LLMRegistry
from google.genai import types

from bench.harness.fake_openai_server import answer, city_in, weather

#: The model name both sides use (the official side resolves it through ADK's registry).
MODEL_NAME = "bench-weather"
INSTRUCTIONS = "You are a weather assistant. Use get_weather for every city asked about."


class WeatherLlm(BaseLlm):
    """Calls ``get_weather`` for the city of the newest user message, then answers with its
    result; counts tokens as one per four characters of the request, so usage is non-zero."""

    model: str = MODEL_NAME

    @classmethod
    def supported_models(cls) -> list[str]:
        return [MODEL_NAME]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1] if llm_request.contents else None
        parts = (last.parts or []) if last is not None else []
        result = next((p.function_response for p in parts if p.function_response), None)
        if result is not None:
            part = types.Part(text=answer(str((result.response or {}).get("report", ""))))
        else:
            text = next((p.text for p in parts if p.text), "")
            call = types.FunctionCall(name="get_weather", args={"city": city_in(text)})
            part = types.Part(function_call=call)
        prompt = sum(len(p.text or "") for c in llm_request.contents for p in c.parts or [])
        yield LlmResponse(
            content=types.Content(role="model", parts=[part]),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt // 4 + 1, candidates_token_count=len(str(part)) // 4 + 1
            ),
        )


def get_weather(city: str) -> dict[str, str]:
    """Current weather in a city."""
    return {"report": weather(city)}


def register_model() -> None:
    """Make ``MODEL_NAME`` resolvable by name (the official integration's model activity
    builds the model from the request's model name)."""
    LLMRegistry.register(WeatherLlm)
