"""ADKAgentTurn on its own (no Temporal): a run writes nothing until the turn's transaction
applies its outcome, and a standalone writer that appended in between makes that refuse."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from google.adk.errors import StaleSessionError

from statecore.core._errors import InvalidInputError
from statecore.core._models import Message, SessionRef
from statecore.core._profile import SessionProfile
from statecore.core._tokens import TokenCounter
from statecore.integrations.google_adk import StatecoreSessionService
from statecore.integrations.google_adk._turns import ADKAgentTurn
from statecore.operations._agent_turns import AgentTurnOutcome, AgentTurnRequest
from statecore.store import StateStore, StoreTransaction
from statecore.temporal._agent_registry import agent_runners
from tests.integrations.google_adk.adk_agents import RuleLlm, build_agent
from tests.integrations.google_adk.contract_cases import event
from tests.store_backends import open_backend

REF = SessionRef(agent_id="desk", session_id="alice@chat")


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    async with open_backend(request.param, tmp_path, "adkturn") as opened:
        async with opened.transaction() as tx:
            await tx.sessions.ensure(REF)
        yield opened


def request_for(store: StateStore, text: str, turn_id: str = "t1") -> AgentTurnRequest:
    return AgentTurnRequest(
        store=store,
        ref=REF,
        turn_id=turn_id,
        new_messages=[Message(role="user", content=text)],
        profile=SessionProfile(),
        counter=TokenCounter(),
    )


async def commit(store: StateStore, outcome: AgentTurnOutcome, turn_id: str = "t1") -> None:
    """What the turn's activity does with an outcome, minus the turn record."""

    async def work(tx: StoreTransaction) -> None:
        await tx.conversation.append(REF, turn_id, outcome.messages)
        assert outcome.store_writes is not None
        await outcome.store_writes(tx)

    async with store.transaction() as tx:
        await work(tx)


async def test_a_run_writes_nothing_until_its_outcome_commits(store: StateStore) -> None:
    llm = RuleLlm()
    runner = ADKAgentTurn(build_agent(llm))
    outcome = await runner.run_turn(request_for(store, "remember tea"))
    assert outcome.reply.content == "noted" and outcome.reply.name == "desk"
    assert len(outcome.messages) == 4 and outcome.messages[0].role == "user"
    assert outcome.usage.prompt_tokens > 0 and outcome.usage.completion_tokens > 0
    service = StatecoreSessionService(store=store)
    # Nothing stored yet: the session exists for statecore, not yet for ADK.
    assert await service.get_session(app_name="desk", user_id="alice", session_id="chat") is None
    await commit(store, outcome)
    session = await service.get_session(app_name="desk", user_id="alice", session_id="chat")
    assert session is not None and len(session.events) == 4
    assert session.state == {"notes": ["tea"], "user:fact": "tea"}
    assert len(llm.calls) == 2


async def test_a_standalone_append_during_the_run_makes_the_commit_refuse(
    store: StateStore,
) -> None:
    runner = ADKAgentTurn(build_agent())
    await commit(store, await runner.run_turn(request_for(store, "hello")))
    outcome = await runner.run_turn(request_for(store, "remember cake", "t2"))
    service = StatecoreSessionService(store=store)
    session = await service.get_session(app_name="desk", user_id="alice", session_id="chat")
    assert session is not None
    await service.append_event(session, event(text="from elsewhere"))
    with pytest.raises(StaleSessionError):
        await commit(store, outcome, "t2")
    after = await service.get_session(app_name="desk", user_id="alice", session_id="chat")
    assert after is not None and len(after.events) == 3 and "notes" not in after.state


async def test_bad_input_to_the_runner(store: StateStore) -> None:
    runner = ADKAgentTurn(build_agent())
    bad = AgentTurnRequest(
        store=store,
        ref=REF,
        turn_id="t1",
        new_messages=[Message(role="assistant", content="not the user")],
        profile=SessionProfile(),
        counter=TokenCounter(),
    )
    with pytest.raises(InvalidInputError):
        await runner.run_turn(bad)
    with pytest.raises(ValueError, match=r"google\.adk agent"):
        ADKAgentTurn(object())  # type: ignore[arg-type]


def test_the_plugin_registry_wraps_an_adk_agent() -> None:
    runners = agent_runners({"desk": build_agent()})
    assert isinstance(runners["desk"], ADKAgentTurn)
