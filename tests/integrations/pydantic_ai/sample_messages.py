"""A history that holds every message part kind Pydantic AI 2.68 stores and can be built by
hand, for the round-trip tests."""

from __future__ import annotations

import dataclasses
import typing
import warnings
from typing import Any

from pydantic_ai import messages as m

#: Kinds of the request and response part unions not built here, and why.
NOT_BUILT = {
    "InstructionDeltaPart": "carries a run-internal InstructionId",
    "InstructionBaselinePart": "carries run-internal instruction digests",
    "ModelSettingsDeltaPart": "carries run-internal recorded settings",
}


def every_part_history() -> list[m.ModelMessage]:
    image = m.BinaryContent(data=b"\x89PNG\r\n\x1a\n\x00\x01", media_type="image/png")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        legacy_retry: Any = m.RetryPromptPart(
            content="bad arguments", tool_name="lookup", tool_call_id="call-r"
        )
    return [
        m.ModelRequest(
            parts=[
                m.SystemPromptPart(content="You are terse."),
                m.UserPromptPart(
                    content=[
                        "look at this",
                        image,
                        m.ImageUrl(url="https://example.com/a.png"),
                        m.DocumentUrl(url="https://example.com/a.pdf"),
                    ]
                ),
            ],
            instructions="Be brief.",
        ),
        m.ModelResponse(
            parts=[
                m.ThinkingPart(content="they want a lookup", signature="sig"),
                m.TextPart(content="Looking it up."),
                m.ToolCallPart(tool_name="lookup", args={"q": "ü ☃"}, tool_call_id="call-1"),
                m.ToolCallPart(tool_name="lookup", args='{"q": "b"}', tool_call_id="call-2"),
                m.ToolCallPart(tool_name="lookup", args={"q": "c"}, tool_call_id="call-r"),
                m.NativeToolCallPart(tool_name="web_search", args={"q": "x"}, tool_call_id="n-1"),
                m.NativeToolReturnPart(
                    tool_name="web_search", content={"hits": 2}, tool_call_id="n-1"
                ),
                m.FilePart(content=image),
            ],
            usage=m.RequestUsage(input_tokens=12, output_tokens=7),
            model_name="test-model",
            provider_name="test",
            provider_response_id="resp-1",
            finish_reason="tool_call",
        ),
        m.ModelRequest(
            parts=[
                m.ToolReturnPart(tool_name="lookup", content={"a": [1, 2]}, tool_call_id="call-1"),
                m.ToolReturnPart(tool_name="lookup", content="plain", tool_call_id="call-2"),
                legacy_retry,
                m.ToolAvailabilityDeltaPart(),
                m.CapabilityLoadDeltaPart(),
            ]
        ),
        m.ModelResponse(parts=[m.CompactionPart(), m.TextPart(content="Done.")]),
        m.ModelRequest(
            parts=[
                m.RetryFeedbackPart(content="say more", retry=m.RetryInfo(cause="no_output")),
                m.UserPromptPart(content="and again"),
            ]
        ),
        m.ModelResponse(parts=[m.SpeechPart(speaker="assistant")]),
        m.ModelResponse(
            parts=[
                m.ToolSearchCallPart(tool_call_id="search-1"),
                m.LoadCapabilityCallPart(tool_call_id="load-1"),
                m.NativeToolSearchCallPart(tool_call_id="n-2"),
                m.NativeToolSearchReturnPart(content={"discovered_tools": []}, tool_call_id="n-2"),
            ]
        ),
        m.ModelRequest(
            parts=[
                m.ToolSearchReturnPart(content={"discovered_tools": []}, tool_call_id="search-1"),
                m.LoadCapabilityReturnPart(content={"message": "loaded"}, tool_call_id="load-1"),
            ]
        ),
        m.ModelResponse(parts=[m.ThinkingPart(content="")]),
    ]


def part_classes(messages: list[m.ModelMessage]) -> set[str]:
    return {type(part).__name__ for message in messages for part in message.parts}


def union_classes() -> set[str]:
    """Every part class in Pydantic AI's request and response part unions."""
    found: set[str] = set()

    def walk(tp: Any) -> None:
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            found.add(tp.__name__)
            return
        for arg in typing.get_args(tp):
            walk(arg)

    walk(m.ModelRequestPart)
    walk(m.ModelResponsePart)
    return found


def adapter_round_trip(messages: list[m.ModelMessage]) -> list[m.ModelMessage]:
    """What Pydantic AI's own adapter gives back for ``messages`` (dumped, then read)."""
    return m.ModelMessagesTypeAdapter.validate_json(m.ModelMessagesTypeAdapter.dump_json(messages))
