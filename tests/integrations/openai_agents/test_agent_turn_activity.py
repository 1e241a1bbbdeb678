"""The turn activity with an SDK agent registered, on SQLite, PostgreSQL and MariaDB: a retried
attempt of a committed turn runs nothing, racing attempts commit once, and a failed run stores
nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import CommitTurnInput, GenerateInput, GenerateResult
from statecore.core._errors import AgentRunError, ModelUnavailableError
from statecore.core._models import Message, SessionRef
from statecore.integrations.openai_agents import OpenAIAgentTurn
from statecore.integrations.openai_agents._items import ITEM_KEY
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database
from tests.integrations.openai_agents.agents_fixture import RuleModel, build_agent

DIALECTS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mariadb", marks=pytest.mark.mariadb),
]
REF = SessionRef(namespace="oai", agent_id="desk", session_id="s1")


@pytest.fixture(params=DIALECTS)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "oaiact") as made:
        await upgrade_database(made)
        yield made


def turn(turn_id: str, number: int, text: str) -> GenerateInput:
    message = Message(role="user", content=text)
    commit = CommitTurnInput(ref=REF, turn_id=turn_id, turn=number, messages=[message])
    return GenerateInput(ref=REF, turn_id=turn_id, commit=commit)


def activities_on(store: SqlStateStore, model: RuleModel) -> TurnActivities:
    resources = WorkerResources(models={}, agents={"desk": OpenAIAgentTurn(build_agent(model))})
    resources.attach(store)
    return TurnActivities(resources)


async def test_a_retried_attempt_of_a_committed_turn_runs_nothing(url: str) -> None:
    model = RuleModel()
    store = await SqlStateStore.connect(url)
    try:
        acts = activities_on(store, model)
        first = await ActivityEnvironment().run(acts.generate, turn("t1", 1, "weather in Oslo"))
        calls = len(model.inputs)
        retried = await ActivityEnvironment().run(acts.generate, turn("t1", 1, "weather in Oslo"))
        async with store.transaction() as tx:
            log = await tx.conversation.messages(REF)
    finally:
        await store.close()
    assert calls == 2 and len(model.inputs) == calls
    assert first.commit is not None and not first.commit.duplicate
    assert retried.commit is not None and retried.commit.duplicate
    assert retried.message.content == first.message.content == "weather: sunny in Oslo"
    assert [m.metadata[ITEM_KEY].get("type", "message") for m in log] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]


async def test_racing_attempts_of_one_agent_turn_commit_it_once(url: str) -> None:
    stores = [await SqlStateStore.connect(url) for _ in range(4)]
    models = [RuleModel() for _ in stores]

    async def attempt(store: SqlStateStore, model: RuleModel) -> GenerateResult:
        acts = activities_on(store, model)
        return await ActivityEnvironment().run(acts.generate, turn("t1", 1, "two cities A B"))

    try:
        results = await asyncio.gather(
            *(attempt(s, m) for s, m in zip(stores, models, strict=True))
        )
        async with stores[0].transaction() as tx:
            log = await tx.conversation.messages(REF)
    finally:
        for store in stores:
            await store.close()
    commits = [r.commit for r in results]
    assert [c.duplicate for c in commits if c is not None].count(False) == 1
    assert len(log) == 6 and {m.turn_id for m in log} == {"t1"}
    assert {r.message.content for r in results} == {"weather: sunny in A; sunny in B"}


async def test_a_run_that_raises_stores_nothing(url: str) -> None:
    model = RuleModel()
    store = await SqlStateStore.connect(url)
    try:
        acts = activities_on(store, model)
        await ActivityEnvironment().run(acts.generate, turn("t1", 1, "hello"))
        # The activity boundary turns the typed error into a non-retryable failure.
        with pytest.raises(ApplicationError, match="the tool exploded") as failure:
            await ActivityEnvironment().run(acts.generate, turn("t2", 2, "explode"))
        assert failure.value.type == AgentRunError.code and failure.value.non_retryable
        async with store.transaction() as tx:
            log = await tx.conversation.messages(REF)
        assert [m.turn_id for m in log] == ["t1", "t1"]
        after = await ActivityEnvironment().run(acts.generate, turn("t2", 2, "what did I say"))
        assert after.message.content == "hello"
    finally:
        await store.close()


async def test_an_unreachable_model_is_retryable_and_stores_nothing(url: str) -> None:
    store = await SqlStateStore.connect(url)
    try:
        acts = activities_on(store, RuleModel())
        with pytest.raises(ApplicationError) as failure:
            await ActivityEnvironment().run(acts.generate, turn("t1", 1, "unreachable"))
        assert failure.value.type == ModelUnavailableError.code
        assert not failure.value.non_retryable
        async with store.transaction() as tx:
            assert await tx.conversation.messages(REF) == []
    finally:
        await store.close()
