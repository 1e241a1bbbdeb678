"""A deterministic model for ADK agents: run the examples and tests offline.

``OfflineLlm`` is a ``google.adk`` ``BaseLlm`` that answers every request with
``You said: "<the newest user text>"`` (as statecore's ``OfflineModel`` does for plain
sessions), calls no tools and reaches no network. Give it to an agent
(``LlmAgent(..., model=OfflineLlm())``) to try durable turns without a Gemini key; swap in a
real model (``model="gemini-2.5-flash"``) when you have one.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types


class OfflineLlm(BaseLlm):
    """Echoes the newest user text; deterministic, offline, no tool calls."""

    model: str = "offline"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        said = ""
        for content in reversed(llm_request.contents):
            texts = [p.text for p in content.parts or [] if p.text]
            if content.role == "user" and texts:
                said = " ".join(texts)
                break
        reply = types.Part(text=f'You said: "{said}"')
        yield LlmResponse(content=types.Content(role="model", parts=[reply]))
