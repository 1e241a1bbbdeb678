"""Concurrent attempts of one turn's commit (a retried activity racing the original one, on
separate workers): the turn lands once and every attempt returns its stored result. Both
ways a turn commits race here: the buffered-state commit, which looks the turn up in its own
transaction, and the model call, which looked it up in its context read just before."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest
from temporalio.testing import ActivityEnvironment

from statecore.activities._resources import WorkerResources
from statecore.activities._turns import TurnActivities
from statecore.contract._activities import (
    CommitTurnInput,
    CommitTurnResult,
    GenerateInput,
    GenerateResult,
    KVOp,
)
from statecore.core._models import Message, SessionRef, TokenUsage
from statecore.llm._offline import OfflineModel
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database

DIALECTS = [
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("sqlite"),
    pytest.param("mysql", marks=pytest.mark.mariadb),
]
WORKERS = 6
REF = SessionRef(namespace="race", agent_id="agent", session_id="new-session")
T = TypeVar("T")


@pytest.fixture
async def migrated_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "commit") as url:
        await upgrade_database(url)
        yield url


def _first_turn() -> CommitTurnInput:
    return CommitTurnInput(
        ref=REF,
        turn_id="turn-1",
        turn=1,
        messages=[
            Message(role="user", content="hello"),
            Message(role="assistant", content="hi there"),
        ],
        kv=[KVOp(op="put", bucket="notes", key="greeted", value=True)],
        usage=TokenUsage(prompt_tokens=11, completion_tokens=3),
        result={"reply": {"role": "assistant", "content": "hi there"}},
    )


async def _race(
    stores: list[SqlStateStore], attempt: Callable[[TurnActivities], Awaitable[T]]
) -> list[T]:
    """Run ``attempt`` once per store (one worker each), all released at the same moment."""
    start = asyncio.Event()

    async def on(store: SqlStateStore) -> T:
        resources = WorkerResources(models={"default": OfflineModel()})
        resources.attach(store)
        await start.wait()
        return await attempt(TurnActivities(resources))

    racers = [asyncio.create_task(on(s)) for s in stores]
    start.set()
    return await asyncio.gather(*racers)


@pytest.mark.parametrize("migrated_url", DIALECTS, indirect=True)
async def test_racing_commits_of_a_first_turn_land_once_and_agree(migrated_url: str) -> None:
    stores = [await SqlStateStore.connect(migrated_url) for _ in range(WORKERS)]

    async def attempt(activities: TurnActivities) -> CommitTurnResult:
        return await ActivityEnvironment().run(activities.commit_turn, _first_turn())

    try:
        results = await _race(stores, attempt)
        async with stores[0].transaction() as tx:
            log = await tx.conversation.messages(REF)
            greeted = await tx.kv.get(REF.kv_scope, "notes", "greeted")
            record = await tx.turns.get(REF, "turn-1")
            orchestration = await tx.orchestration.get(REF)
    finally:
        for store in stores:
            await store.close()
    # One attempt committed; every other one returned what it stored.
    assert [r.duplicate for r in results].count(False) == 1
    stored = [r.model_dump(exclude={"duplicate"}) for r in results]
    assert all(r == stored[0] for r in stored)
    assert (results[0].first_seq, results[0].last_seq, results[0].message_count) == (1, 2, 2)
    assert [(m.seq, m.content) for m in log] == [(1, "hello"), (2, "hi there")]
    assert greeted is not None and (greeted.value, greeted.revision) == (True, 1)
    assert record is not None and record[0] == 1
    assert orchestration is not None
    assert orchestration.cumulative_token_usage == TokenUsage(prompt_tokens=11, completion_tokens=3)


@pytest.mark.parametrize("migrated_url", DIALECTS, indirect=True)
async def test_racing_model_calls_of_one_turn_commit_it_once(migrated_url: str) -> None:
    """Every attempt reads the context before any has committed, so each calls the model and
    commits without looking the turn up again; the turn's record lets exactly one through."""
    stores = [await SqlStateStore.connect(migrated_url) for _ in range(WORKERS)]
    ref = SessionRef(namespace="race", agent_id="agent", session_id="model-calls")
    question = Message(role="user", content="what is on the list?")
    commit = CommitTurnInput(
        ref=ref,
        turn_id="turn-1",
        turn=1,
        messages=[question],
        kv=[KVOp(op="put", bucket="notes", key="asked", value=1, expected_revision=0)],
    )
    request = GenerateInput(ref=ref, turn_id="turn-1", pending=[question], commit=commit)

    async def attempt(activities: TurnActivities) -> GenerateResult:
        return await ActivityEnvironment().run(activities.generate, request)

    try:
        results = await _race(stores, attempt)
        async with stores[0].transaction() as tx:
            log = await tx.conversation.messages(ref)
            asked = await tx.kv.get(ref.kv_scope, "notes", "asked")
            orchestration = await tx.orchestration.get(ref)
    finally:
        for store in stores:
            await store.close()
    commits = [r.commit for r in results]
    assert all(c is not None for c in commits)
    assert [c.duplicate for c in commits if c is not None].count(False) == 1
    assert len({r.message.content for r in results}) == 1
    assert [(m.seq, m.role) for m in log] == [(1, "user"), (2, "assistant")]
    assert asked is not None and asked.revision == 1
    winner = next(r for r in results if r.commit is not None and not r.commit.duplicate)
    assert orchestration is not None
    assert orchestration.cumulative_token_usage == winner.usage
