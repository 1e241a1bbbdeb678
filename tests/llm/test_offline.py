"""OfflineModel: deterministic, and its replies show the context it was given."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statecore.core._models import Message
from statecore.core._tokens import TokenCounter
from statecore.llm import CONTEXT_PART, ModelRequest, OfflineModel, ToolSpec

CALCULATOR = ToolSpec(
    name="add",
    description="Add two numbers",
    parameters={"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
)


@pytest.fixture(scope="module")
def model() -> OfflineModel:
    return OfflineModel()


def user(text: str) -> Message:
    return Message(role="user", content=text)


def part(kind: str, text: str) -> Message:
    return Message(role="system", content=text, metadata={CONTEXT_PART: kind})


async def test_same_request_same_response_across_instances(model):
    request = ModelRequest(
        messages=[part("system_prompt", "Be kind."), user("one"), user('use tool add {"a": 1}')],
        tools=[CALCULATOR],
    )
    first = await model.complete(request)
    again = await model.complete(request)
    fresh = await OfflineModel().complete(request.model_copy(deep=True))
    assert first == again == fresh
    assert first.message.tool_calls[0].id == fresh.message.tool_calls[0].id


async def test_reply_reports_context_size_and_echoes_the_last_user_message(model):
    short = await model.complete(ModelRequest(messages=[user("Where is my order?")]))
    assert short.message.content == (
        "[offline] user messages: 1, messages: 1, system prompt: no, summary: no, hints: 0. "
        'You said: "Where is my order?"'
    )
    long_request = ModelRequest(
        messages=[
            part("system_prompt", "You are a shop assistant."),
            part("summary", "Summary of the earlier conversation:\nThe user ordered a lamp."),
            part("hints", "Important context:\n- ships from Lyon\n- VIP customer"),
            user("hi"),
            Message(role="assistant", content="hello"),
            user("Where is my lamp?"),
        ]
    )
    long = await model.complete(long_request)
    assert long.message.content.startswith(
        "[offline] user messages: 2, messages: 6, system prompt: yes, summary: yes, hints: 2."
    )
    assert long.message.content.endswith('You said: "Where is my lamp?"')
    assert long.finish_reason == "stop"
    assert long.model == "offline"


def test_context_part_matches_what_the_context_assembler_writes():
    from statecore.operations import _context_window as context

    assert context.PART_KEY == CONTEXT_PART


async def test_usage_is_counted_with_the_token_counter(model):
    request = ModelRequest(messages=[user("count me")], tools=[CALCULATOR])
    response = await model.complete(request)
    counter = TokenCounter()
    expected_prompt = counter.count_messages(request.messages) + counter.count_text(
        CALCULATOR.model_dump_json()
    )
    assert response.usage.prompt_tokens == expected_prompt
    assert response.usage.completion_tokens == counter.count_text(response.message.content)


async def test_tool_directive_then_tool_result_gives_a_final_answer(model):
    history = [user('please use tool add {"a": 2, "b": 3}')]
    asked = await model.complete(ModelRequest(messages=history, tools=[CALCULATOR]))
    assert asked.finish_reason == "tool_calls"
    assert asked.message.content == ""
    [call] = asked.message.tool_calls
    assert call.name == "add"
    assert json.loads(call.arguments) == {"a": 2, "b": 3}
    assert call.id.startswith("call_")

    history += [asked.message, Message(role="tool", content="5", tool_call_id=call.id)]
    final = await model.complete(ModelRequest(messages=history, tools=[CALCULATOR]))
    assert final.finish_reason == "stop"
    assert not final.message.tool_calls
    assert "Tool add returned: 5" in final.message.content


async def test_directive_without_arguments_calls_with_an_empty_object(model):
    response = await model.complete(
        ModelRequest(messages=[user("Use Tool add")], tools=[CALCULATOR])
    )
    assert response.message.tool_calls[0].arguments == "{}"


async def test_directive_for_a_tool_not_offered_is_answered_in_text(model):
    response = await model.complete(ModelRequest(messages=[user("use tool delete_all {}")]))
    assert not response.message.tool_calls
    assert "Tool 'delete_all' is not offered in this request (offered: none)" in (
        response.message.content
    )


async def test_directive_with_arguments_that_are_not_an_object_is_answered_in_text(model):
    response = await model.complete(
        ModelRequest(messages=[user("use tool add [1, 2]")], tools=[CALCULATOR])
    )
    assert not response.message.tool_calls
    assert "needs a JSON object as arguments; got: [1, 2]" in response.message.content


async def test_directive_in_an_older_message_does_not_call_again(model):
    response = await model.complete(
        ModelRequest(
            messages=[user("use tool add {}"), Message(role="assistant", content="done"),
                      user("thanks")],
            tools=[CALCULATOR],
        )
    )  # fmt: skip
    assert not response.message.tool_calls
    assert response.message.content.endswith('You said: "thanks"')


async def test_max_tokens_cuts_the_reply(model):
    response = await model.complete(
        ModelRequest(messages=[user("a rather long question " * 20)], max_tokens=5)
    )
    assert response.finish_reason == "length"
    assert response.usage.completion_tokens <= 5
    assert response.message.content.startswith("[offline]")


async def test_summarize_is_extractive_and_keeps_the_previous_summary(model):
    request = ModelRequest(
        purpose="summarize",
        messages=[
            Message(role="system", content="Summarize."),
            part("summary", "- The user is Alice."),
            user("I ordered a lamp. It has not arrived.\nOrder number 42!"),
            Message(role="assistant", content="Let me check that for you."),
        ],
    )
    response = await model.complete(request)
    assert response.message.content == (
        "- The user is Alice.\n- I ordered a lamp.\n- Order number 42!\n"
        "- Let me check that for you."
    )
    assert response == await model.complete(request)


async def test_summarize_drops_the_oldest_lines_to_fit_max_tokens(model):
    lines = [user(f"Fact number {i} is important.") for i in range(40)]
    response = await model.complete(
        ModelRequest(purpose="summarize", messages=lines, max_tokens=30)
    )
    text = response.message.content
    assert TokenCounter().count_text(text) <= 30
    assert text.endswith("- Fact number 39 is important.")
    assert "Fact number 0 " not in text


async def test_usage_takes_the_callers_count_of_the_prompt(model):
    """Context assembly counts the prompt from stored per-message counts; the model reports
    that count (plus its tools) instead of tokenising the whole history again."""
    request = ModelRequest(messages=[user("count me")], tools=[CALCULATOR], prompt_tokens=40)
    response = await model.complete(request)
    tools = TokenCounter().count_text(CALCULATOR.model_dump_json())
    assert response.usage.prompt_tokens == 40 + tools


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="ab cd,.-\u00e9\u4e2d", min_size=1, max_size=40), max_size=30),
    budget=st.integers(min_value=1, max_value=120),
)
def test_a_summary_keeps_the_longest_run_of_newest_lines_that_fits(lines, budget):
    """The summary keeps dropping its oldest line until the joined text fits the budget (or
    one line is left); the per-line shortcut must land exactly where that rule does."""
    model, counter = OfflineModel(), TokenCounter()
    expected = list(lines)
    while len(expected) > 1 and counter.count_text("\n".join(expected)) > budget:
        expected.pop(0)
    assert lines[model._newest_lines_within(list(lines), budget) :] == expected
