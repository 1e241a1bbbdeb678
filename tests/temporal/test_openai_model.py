"""A session answered by the OpenAI-compatible client, against a local HTTP model server."""

from __future__ import annotations

import time

import pytest

from statecore.core._errors import ModelError
from statecore.llm import OpenAICompatibleModel
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.llm.model_server import ModelServer, Reply, completion
from tests.temporal.conftest import running_env


@pytest.fixture
def model_server():
    server = ModelServer().start()
    yield server
    server.stop()


async def test_turns_go_through_the_http_model_with_context_from_sql(
    dev_server: DevServer, model_server: ModelServer
) -> None:
    model = OpenAICompatibleModel(model_server.base_url, api_key="sk-test", model="served-model")
    model_server.play(
        completion("first answer"),
        Reply(status=503, body={"error": {"message": "overloaded"}}),
        completion("second answer"),
    )
    async with (
        fresh_database("sqlite", "openai") as url,
        running_env(dev_server, url, models={"default": model}) as env,
    ):
        one = await env.sessions.send(
            env.agent, "http", "What is 2+2?", turn_id="h1", system_prompt="Answer briefly."
        )
        two = await env.sessions.send(env.agent, "http", "And 3+3?", turn_id="h2")
        # The server's Retry-After sets the activity's next retry (the policy alone: 1 s).
        model_server.play(
            Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "3"}),
            completion("third answer"),
        )
        started = time.monotonic()
        three = await env.sessions.send(env.agent, "http", "And 4+4?", turn_id="h3")
        waited = time.monotonic() - started
    await model.aclose()
    assert three.reply.content == "third answer"
    assert waited >= 2.9
    assert one.reply.content == "first answer"
    assert two.reply.content == "second answer"  # the 503 was retried by the activity
    assert one.usage.prompt_tokens == 11 and one.usage.completion_tokens == 7
    last = model_server.received[-3].json  # the second turn's successful call
    assert last["model"] == "served-model"
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "user"]
    assert last["messages"][1]["content"] == "What is 2+2?"
    assert last["messages"][2]["content"] == "first answer"
    assert model_server.received[-1].headers.get("authorization") == "Bearer sk-test"
    assert len(model_server.received) == 5  # one call per attempt: 1 + (1 + 1) + (1 + 1)


async def test_a_rejected_model_request_fails_the_turn_not_the_session(
    dev_server: DevServer, model_server: ModelServer
) -> None:
    model = OpenAICompatibleModel(model_server.base_url, model="m")
    model_server.play(Reply(status=400, body={"error": {"message": "context too long"}}))
    async with (
        fresh_database("sqlite", "openai-bad") as url,
        running_env(dev_server, url, models={"default": model}) as env,
    ):
        with pytest.raises(ModelError, match="context too long"):
            await env.sessions.send(env.agent, "http-bad", "hello", turn_id="b1")
        assert len(model_server.received) == 1  # 4xx is not retried
        model_server.play(completion("recovered"))
        ok = await env.sessions.send(env.agent, "http-bad", "hello again", turn_id="b2")
        assert ok.reply.content == "recovered"
        report = await env.sessions.describe(env.agent, "http-bad")
        assert report.checkpoint.message_count == 2  # the failed turn stored nothing
    await model.aclose()
