"""OpenAICompatibleModel against a real local HTTP server: wire format, replies, error mapping.

Retries belong to the Temporal activity (the client makes one attempt by default), so these
tests check that each failure comes out as the right typed error: retryable or not."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from statecore.core._errors import InvalidInputError, ModelError, ModelUnavailableError
from statecore.core._models import Message, ToolCall
from statecore.llm import ModelRequest, OpenAICompatibleModel, ToolSpec
from statecore.llm._openai_compat import _retry_after
from statecore.llm._openai_wire import USAGE_ESTIMATED

from .model_server import ModelServer, Reply, completion

FAST = {"timeout_seconds": 5}


def client(server: ModelServer, **kwargs: object) -> OpenAICompatibleModel:
    options = {**FAST, **kwargs}
    return OpenAICompatibleModel(server.base_url, model="test-model", **options)  # type: ignore[arg-type]


def hello() -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content="Hello?")])


PARIS_CALL = ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}')
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


async def test_request_wire_format_carries_roles_tools_and_tool_call_ids(model_server):
    model_server.play(completion("It is 12 degrees in Paris."))
    request = ModelRequest(
        messages=[
            Message(role="system", content="Be brief."),
            Message(role="user", content="Weather in Paris?", name="alice"),
            Message(role="assistant", tool_calls=[PARIS_CALL]),
            Message(role="tool", content='{"temp": 12}', tool_call_id="call_1",
                    metadata={"local": "never sent"}),
        ],
        tools=[WEATHER],
        temperature=0.2,
        max_tokens=64,
    )  # fmt: skip
    async with client(model_server, api_key="sk-test-123") as model:
        await model.complete(request)

    [sent] = model_server.received
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-123"
    body = sent.json
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 64
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?", "name": "alice"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": '{"temp": 12}', "tool_call_id": "call_1"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]


async def test_no_authorization_header_without_a_key_and_optional_fields_omitted(model_server):
    model_server.play(completion())
    async with client(model_server) as model:
        await model.complete(hello())
    [sent] = model_server.received
    assert "authorization" not in sent.headers
    assert set(sent.json) == {"model", "messages"}


async def test_text_reply_with_usage(model_server):
    model_server.play(completion("Hi there.", usage={"prompt_tokens": 21, "completion_tokens": 4}))
    async with client(model_server) as model:
        response = await model.complete(hello())
    assert response.message == Message(role="assistant", content="Hi there.")
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (21, 4)
    assert response.finish_reason == "stop"
    assert response.model == "served-model"
    assert model.name == "openai:test-model"


async def test_tool_call_reply_becomes_tool_call_objects(model_server):
    calls = [
        {"id": "call_a", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        {"id": "call_b", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
    ]  # fmt: skip
    model_server.play(completion(None, message={"tool_calls": calls}, finish_reason="tool_calls"))
    async with client(model_server) as model:
        response = await model.complete(
            ModelRequest(messages=[Message(role="user", content="Oslo and Rome?")], tools=[WEATHER])
        )
    assert response.finish_reason == "tool_calls"
    assert response.message.content == ""
    assert response.message.tool_calls == [
        ToolCall(id="call_a", name="get_weather", arguments='{"city": "Oslo"}'),
        ToolCall(id="call_b", name="get_weather", arguments='{"city": "Rome"}'),
    ]


async def test_missing_usage_is_counted_locally_and_marked(model_server):
    reply = completion("Counted here.")
    del reply.body["usage"]
    model_server.play(reply)
    async with client(model_server) as model:
        response = await model.complete(hello())
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0
    assert response.message.metadata == {USAGE_ESTIMATED: True}


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
async def test_transient_statuses_raise_retryable_unavailable_after_one_attempt(
    model_server, status
):
    model_server.play(Reply(status, {"error": {"message": f"busy {status}"}}))
    async with client(model_server) as model:
        with pytest.raises(ModelUnavailableError) as caught:
            await model.complete(hello())
    assert len(model_server.received) == 1  # the activity's retry policy retries, not the SDK
    assert caught.value.retryable is True
    assert caught.value.details["status_code"] == status
    assert f"busy {status}" in caught.value.message


async def test_429_carries_the_servers_retry_after(model_server):
    busy = Reply(429, {"error": {"message": "rate limited"}}, headers={"Retry-After": "7"})
    model_server.play(busy)
    async with client(model_server) as model:
        with pytest.raises(ModelUnavailableError) as caught:
            await model.complete(hello())
    assert caught.value.details["retry_after_seconds"] == 7
    assert len(model_server.received) == 1


async def test_sdk_retries_when_asked_outside_temporal(model_server):
    down = Reply(503, {"error": {"message": "loading model"}}, headers={"Retry-After": "0"})
    model_server.play(down, down, completion("Up again."))
    async with client(model_server, max_retries=2) as model:
        response = await model.complete(hello())
    assert response.message.content == "Up again."
    assert len(model_server.received) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_fail_at_once_with_the_server_message(model_server, status):
    model_server.play(Reply(status, {"error": {"message": f"server says {status}"}}))
    async with client(model_server, max_retries=3) as model:
        with pytest.raises(ModelError) as caught:
            await model.complete(hello())
    assert not isinstance(caught.value, ModelUnavailableError)
    assert caught.value.retryable is False
    assert f"server says {status}" in caught.value.message
    assert caught.value.details["status_code"] == status
    assert len(model_server.received) == 1  # not retried even when the SDK may retry


async def test_error_messages_never_contain_the_api_key(model_server):
    key = "sk-secret-abcdef"
    model_server.play(Reply(401, {"error": {"message": f"Incorrect API key provided: {key}"}}))
    async with client(model_server, api_key=key) as model:
        assert key not in repr(model)
        with pytest.raises(ModelError) as caught:
            await model.complete(hello())
    assert key not in str(caught.value)
    assert "Incorrect API key provided: ***" in caught.value.message


async def test_timeout_is_retryable_unavailable_at_its_deadline(model_server):
    model_server.play(Reply(delay=3.0, body=completion().body))
    started = time.monotonic()
    async with client(model_server, timeout_seconds=1.0) as model:
        with pytest.raises(ModelUnavailableError) as caught:
            await model.complete(hello())
    assert time.monotonic() - started < 2.9  # gave up at the deadline, not at the reply
    assert "no response within 1.0s" in caught.value.message
    assert caught.value.retryable is True
    # One attempt at most (a loaded machine may time out before the server logs it).
    assert len(model_server.received) <= 1


async def test_connection_refused_is_retryable_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port now: the call is refused.
    model = OpenAICompatibleModel(f"http://127.0.0.1:{port}/v1", model="m", **FAST)
    async with model:
        with pytest.raises(ModelUnavailableError) as caught:
            await model.complete(hello())
    assert caught.value.retryable is True
    assert "unavailable" in caught.value.message


async def test_the_environment_does_not_reach_the_server(model_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-env")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-from-env")
    model_server.play(completion())
    async with client(model_server) as model:
        await model.complete(hello())
    [sent] = model_server.received
    assert "authorization" not in sent.headers
    assert "openai-organization" not in sent.headers
    assert "openai-project" not in sent.headers


@pytest.mark.parametrize(
    ("model_name", "field"),
    [
        ("gpt-5", "max_completion_tokens"),
        ("gpt-5-mini", "max_completion_tokens"),
        ("o3-mini", "max_completion_tokens"),
        ("o1", "max_completion_tokens"),
        ("openai/o4-mini", "max_completion_tokens"),
        ("gpt-4o-mini", "max_tokens"),
        ("llama3.1", "max_tokens"),
        ("qwen2.5:7b", "max_tokens"),
    ],
)
async def test_the_reply_cap_goes_in_the_field_the_model_takes(model_server, model_name, field):
    model_server.play(completion())
    request = ModelRequest(messages=[Message(role="user", content="Hi")], max_tokens=50)
    async with OpenAICompatibleModel(model_server.base_url, model=model_name, **FAST) as model:
        await model.complete(request)
    body = model_server.received[0].json
    assert body[field] == 50
    other = {"max_tokens", "max_completion_tokens"} - {field}
    assert not other & set(body)


async def test_the_reply_cap_field_can_be_configured(model_server):
    model_server.play(completion())
    request = ModelRequest(messages=[Message(role="user", content="Hi")], max_tokens=9)
    async with client(model_server, token_limit_field="max_completion_tokens") as model:
        await model.complete(request)
    body = model_server.received[0].json
    assert body["max_completion_tokens"] == 9
    assert "max_tokens" not in body


@pytest.mark.parametrize(
    ("header", "expected"),
    [("7", 7), ("0.25", 0.25), ("-3", 0), ("soon", None), ("", None)],
)
def test_retry_after_seconds_are_read(header, expected):
    assert _retry_after(header) == expected


def test_retry_after_http_date_is_read():
    when = datetime.now(UTC) + timedelta(seconds=60)
    value = _retry_after(format_datetime(when, usegmt=True))
    assert value is not None
    assert 55 <= value <= 60


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("this is not json", "not JSON"),
        ({"id": "x", "choices": []}, "no choices"),
        ({"id": "x"}, "no choices"),
        ({"choices": [{"finish_reason": "stop"}]}, "no message"),
        (completion("").body, "empty reply"),
    ],
)
async def test_malformed_success_bodies_are_model_errors(model_server, body, expected):
    model_server.play(Reply(200, body))
    async with client(model_server, max_retries=3) as model:
        with pytest.raises(ModelError) as caught:
            await model.complete(hello())
    assert not isinstance(caught.value, ModelUnavailableError)
    assert expected in caught.value.message
    assert len(model_server.received) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_url": "127.0.0.1:8000/v1"},
        {"api_key": ""},
        {"api_key": "sk bad"},
        {"model": " "},
        {"timeout_seconds": 0},
        {"max_retries": -1},
        {"token_limit_field": "max_output_tokens"},
    ],
)
def test_bad_construction_arguments_are_invalid_input(kwargs):
    arguments = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs}
    with pytest.raises(InvalidInputError):
        OpenAICompatibleModel(**arguments)  # type: ignore[arg-type]


def test_statecore_imports_without_the_openai_package_and_says_which_extra_to_install():
    # A fresh interpreter in which `import openai` fails, as where the extra is not installed.
    script = textwrap.dedent(
        """
        import sys

        class NoOpenAI:
            def find_spec(self, name, path=None, target=None):
                if name == "openai" or name.startswith("openai."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NoOpenAI())
        import statecore
        from statecore.core._errors import StatecoreError
        from statecore.llm import OfflineModel, OpenAICompatibleModel

        OfflineModel()
        try:
            OpenAICompatibleModel("http://127.0.0.1:1/v1", model="m")
        except StatecoreError as err:
            print(err.message)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'statecore[openai]'" in done.stdout


# --- streaming -------------------------------------------------------------------------------


async def test_stream_yields_text_as_it_arrives_then_the_response(model_server):
    from statecore.llm import ModelResponse
    from statecore.llm._base import TextDelta

    from .model_server import streamed

    model_server.play(
        streamed(["It is ", "12 degrees ", "in Paris."], usage={"prompt_tokens": 9,
                 "completion_tokens": 6}, chunk_delay=0.05)
    )  # fmt: skip
    async with client(model_server, streams=True) as model:
        loop = __import__("asyncio").get_running_loop()
        started = loop.time()
        arrived = []
        items = []
        async for item in model.stream(hello()):
            items.append(item)
            arrived.append(loop.time() - started)
    sent = model_server.received[-1].json
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    deltas = [i.text for i in items if isinstance(i, TextDelta)]
    assert deltas == ["It is ", "12 degrees ", "in Paris."]
    # The first delta came long before the last chunk was sent.
    assert arrived[0] < arrived[-1] - 0.1
    response = items[-1]
    assert isinstance(response, ModelResponse)
    assert response.message.content == "It is 12 degrees in Paris."
    assert response.usage.prompt_tokens == 9 and response.finish_reason == "stop"
    assert model.streams


async def test_streamed_tool_calls_are_assembled_from_their_pieces(model_server):
    from statecore.llm._base import ToolCallDelta

    from .model_server import streamed

    model_server.play(
        streamed([], tool_calls=[{"id": "call_1", "name": "get_weather",
                                  "arguments": '{"city":"Paris"}'}])
    )  # fmt: skip
    async with client(model_server) as model:
        items = [i async for i in model.stream(ModelRequest(messages=hello().messages,
                                                              tools=[WEATHER]))]  # fmt: skip
    calls = [i.call for i in items if isinstance(i, ToolCallDelta)]
    assert calls == [PARIS_CALL]
    assert items[-1].message.tool_calls == [PARIS_CALL]
    assert items[-1].finish_reason == "tool_calls"
    # No usage chunk: counted locally, as complete() does.
    assert items[-1].message.metadata.get(USAGE_ESTIMATED)


async def test_a_streamed_error_is_typed_as_completes_are(model_server):
    model_server.play(Reply(status=503, body={"error": {"message": "overloaded"}}))
    async with client(model_server) as model:
        with pytest.raises(ModelUnavailableError):
            async for _ in model.stream(hello()):
                pass
    model_server.play(Reply(status=400, body={"error": {"message": "bad"}}))
    async with client(model_server) as model:
        with pytest.raises(ModelError) as caught:
            async for _ in model.stream(hello()):
                pass
    assert not isinstance(caught.value, ModelUnavailableError)


async def test_a_stream_slower_than_the_timeout_is_unavailable(model_server):
    from .model_server import streamed

    model_server.play(streamed(["a", "b", "c", "d"], chunk_delay=0.5))
    async with client(model_server, timeout_seconds=0.6) as model:
        with pytest.raises(ModelUnavailableError):
            async for _ in model.stream(hello()):
                pass


def test_streams_must_be_a_flag():
    with pytest.raises(InvalidInputError):
        OpenAICompatibleModel("http://127.0.0.1:1/v1", model="m", streams="yes")  # type: ignore[arg-type]
