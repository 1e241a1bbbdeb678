"""ModelSummarizer over both models, and choosing a model from a spec string."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from statecore.core._errors import InvalidInputError, ModelError
from statecore.core._models import Message, StoredMessage, ToolCall
from statecore.llm import (
    ChatModel,
    ModelSummarizer,
    OfflineModel,
    OpenAICompatibleModel,
    model_from_config,
)

from .model_server import Reply, completion

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def stored(seq: int, message: Message) -> StoredMessage:
    return StoredMessage(
        **message.model_dump(),
        seq=seq,
        turn_id=f"turn-{seq}",
        index=0,
        tokens=10,
        cumulative_tokens=10 * seq,
        created_at=NOW,
    )


LOG = [
    stored(1, Message(role="user", content="What is the weather in Paris?\nI fly tomorrow.")),
    stored(
        2,
        Message(
            role="assistant",
            tool_calls=[ToolCall(id="c1", name="get_weather", arguments='{"city":"Paris"}')],
        ),
    ),
    stored(3, Message(role="tool", content='{"temp": 12}', tool_call_id="c1")),
    stored(4, Message(role="assistant", content="It is 12 degrees in Paris. Pack a jacket.")),
]


async def test_offline_summary_folds_messages_into_the_previous_summary():
    summarizer = ModelSummarizer(OfflineModel())
    summary = await summarizer.summarize("- The user is Alice.", LOG)
    assert summary == (
        "- The user is Alice.\n"
        "- user: What is the weather in Paris?\n"
        '- assistant: called tool get_weather with {"city":"Paris"}\n'
        '- tool get_weather: {"temp": 12}\n'
        "- assistant: It is 12 degrees in Paris."
    )
    assert summary == await summarizer.summarize("- The user is Alice.", LOG)


async def test_summary_request_on_the_wire(model_server):
    model_server.play(completion("  Alice flies to Paris; 12 degrees there.  "))
    async with OpenAICompatibleModel(model_server.base_url, model="m") as model:
        summary = await ModelSummarizer(model, max_summary_tokens=200).summarize(
            "The user is Alice.", LOG
        )
    assert summary == "Alice flies to Paris; 12 degrees there."
    body = model_server.received[0].json
    assert body["max_tokens"] == 200
    assert body["temperature"] == 0
    assert "tools" not in body
    instructions, previous, transcript = body["messages"]
    assert instructions["role"] == "system"
    assert "summary" in instructions["content"]
    assert previous == {"role": "system", "content": "The user is Alice."}
    assert transcript["role"] == "user"
    assert transcript["content"].splitlines() == [
        "user: What is the weather in Paris? I fly tomorrow.",
        'assistant: called tool get_weather with {"city":"Paris"}',
        'tool get_weather: {"temp": 12}',
        "assistant: It is 12 degrees in Paris. Pack a jacket.",
    ]


async def test_nothing_to_fold_returns_the_previous_summary_without_a_call(model_server):
    async with OpenAICompatibleModel(model_server.base_url, model="m") as model:
        summarizer = ModelSummarizer(model)
        assert await summarizer.summarize("kept as is", []) == "kept as is"
        assert await summarizer.summarize(None, []) == ""
    assert model_server.received == []


async def test_a_model_error_while_summarising_propagates(model_server):
    model_server.play(Reply(400, {"error": {"message": "context too long"}}))
    async with OpenAICompatibleModel(model_server.base_url, model="m") as model:
        with pytest.raises(ModelError, match="context too long"):
            await ModelSummarizer(model).summarize(None, LOG)


def test_offline_spec():
    model = model_from_config("offline")
    assert isinstance(model, OfflineModel)
    assert isinstance(model, ChatModel)
    assert model.name == "offline"


def test_openai_spec_builds_a_client():
    model = model_from_config("openai:llama3.1", base_url="http://127.0.0.1:11434/v1", api_key="k")
    assert isinstance(model, OpenAICompatibleModel)
    assert isinstance(model, ChatModel)
    assert model.name == "openai:llama3.1"
    assert model.model == "llama3.1"
    assert model.base_url == "http://127.0.0.1:11434/v1"


@pytest.mark.parametrize(
    ("spec", "kwargs", "says"),
    [
        ("openai:gpt-4o-mini", {}, "needs base_url"),
        ("openai:", {"base_url": "http://x/v1"}, "names no model"),
        ("anthropic:claude", {}, "unknown model spec"),
        ("", {}, "unknown model spec"),
        ("offline", {"base_url": "http://x/v1"}, "takes no base_url"),
        ("offline", {"api_key": "k"}, "takes no base_url or api_key"),
    ],
)
def test_bad_specs_are_invalid_input(spec, kwargs, says):
    with pytest.raises(InvalidInputError, match=says):
        model_from_config(spec, **kwargs)
