"""The turn activity with a Pydantic AI agent registered, on SQLite, PostgreSQL and MariaDB: a
retried attempt of a committed turn runs nothing, racing attempts commit once, an unavailable
model is retryable and stores nothing, and dependencies are built per turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import CommitTurnInput, GenerateInput, GenerateResult
from statecore.core._errors import ModelUnavailableError
from statecore.core._models import Message, SessionRef
from statecore.integrations.pydantic_ai import PydanticAIAgentTurn
from statecore.integrations.pydantic_ai._codec import ENTRY_KEY
from statecore.operations._agent_turns import AgentTurnRequest
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database
from tests.integrations.pydantic_ai.agents_fixture import Forecasts, build_desk_agent

DIALECTS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mariadb", marks=pytest.mark.mariadb),
]
REF = SessionRef(namespace="pai", agent_id="desk", session_id="s1")


@pytest.fixture(params=DIALECTS)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "paiact") as made:
        await upgrade_database(made)
        yield made


def turn(turn_id: str, number: int, text: str) -> GenerateInput:
    message = Message(role="user", content=text)
    commit = CommitTurnInput(ref=REF, turn_id=turn_id, turn=number, messages=[message])
    return GenerateInput(ref=REF, turn_id=turn_id, commit=commit)


def activities_on(store: SqlStateStore, runner: PydanticAIAgentTurn) -> TurnActivities:
    resources = WorkerResources(models={}, agents={"desk": runner})
    resources.attach(store)
    return TurnActivities(resources)


def calls_in(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def test_a_retried_attempt_of_a_committed_turn_runs_nothing(url: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    store = await SqlStateStore.connect(url)
    try:
        acts = activities_on(store, PydanticAIAgentTurn(build_desk_agent(calls), deps=Forecasts()))
        first = await ActivityEnvironment().run(acts.generate, turn("t1", 1, "weather in Oslo"))
        made = calls_in(calls)
        retried = await ActivityEnvironment().run(acts.generate, turn("t1", 1, "weather in Oslo"))
        async with store.transaction() as tx:
            log = await tx.conversation.messages(REF)
    finally:
        await store.close()
    assert made == 2 and calls_in(calls) == made
    assert first.commit is not None and not first.commit.duplicate
    assert retried.commit is not None and retried.commit.duplicate
    assert retried.message.content == first.message.content == "weather: sunny in Oslo"
    assert [m.metadata[ENTRY_KEY]["message"]["kind"] for m in log] == [
        "request",
        "response",
        "request",
        "response",
    ]


async def test_racing_attempts_of_one_agent_turn_commit_it_once(url: str) -> None:
    stores = [await SqlStateStore.connect(url) for _ in range(4)]

    async def attempt(store: SqlStateStore) -> GenerateResult:
        runner = PydanticAIAgentTurn(build_desk_agent(), deps=Forecasts())
        acts = activities_on(store, runner)
        return await ActivityEnvironment().run(acts.generate, turn("t1", 1, "weather in Rome"))

    try:
        results = await asyncio.gather(*(attempt(s) for s in stores))
        async with stores[0].transaction() as tx:
            log = await tx.conversation.messages(REF)
    finally:
        for store in stores:
            await store.close()
    commits = [r.commit for r in results]
    assert [c.duplicate for c in commits if c is not None].count(False) == 1
    assert len(log) == 4 and {m.turn_id for m in log} == {"t1"}
    assert {r.message.content for r in results} == {"weather: sunny in Rome"}


async def test_an_unavailable_model_is_retryable_and_stores_nothing(url: str) -> None:
    store = await SqlStateStore.connect(url)
    try:
        acts = activities_on(store, PydanticAIAgentTurn(build_desk_agent(), deps=Forecasts()))
        with pytest.raises(ApplicationError) as failure:
            await ActivityEnvironment().run(acts.generate, turn("t1", 1, "unreachable"))
        assert failure.value.type == ModelUnavailableError.code
        assert not failure.value.non_retryable
        async with store.transaction() as tx:
            assert await tx.conversation.messages(REF) == []
    finally:
        await store.close()


async def test_dependencies_are_built_per_turn_from_its_request(url: str) -> None:
    seen: list[str] = []

    def deps_for(request: AgentTurnRequest) -> Forecasts:
        seen.append(request.turn_id)
        return Forecasts({"Oslo": f"fog for {request.ref.session_id}"})

    store = await SqlStateStore.connect(url)
    try:
        runner = PydanticAIAgentTurn(build_desk_agent(), deps_factory=deps_for)
        acts = activities_on(store, runner)
        done = await ActivityEnvironment().run(acts.generate, turn("t1", 1, "weather in Oslo"))
    finally:
        await store.close()
    assert seen == ["t1"] and done.message.content == "weather: fog for s1 in Oslo"
    with pytest.raises(ValueError, match="not both"):
        PydanticAIAgentTurn(build_desk_agent(), deps=Forecasts(), deps_factory=deps_for)
    with pytest.raises(ValueError, match=r"pydantic_ai\.Agent"):
        PydanticAIAgentTurn(object())  # type: ignore[arg-type]
