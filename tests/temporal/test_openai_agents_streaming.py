"""An OpenAI Agents SDK agent's turn streams with ``OpenAIAgentTurn(agent, stream=True)``: the
model's text deltas from ``Runner.run_streamed`` reach a reader before the turn commits."""

from __future__ import annotations

import uuid

import pytest

from statecore.contract._streams import FinalEvent, TextEvent
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.temporal.conftest import running_env
from tests.temporal.test_streaming import LONG, replayed_text

agents = pytest.importorskip("agents")

from statecore.integrations.openai_agents import OfflineAgentModel, OpenAIAgentTurn  # noqa: E402


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "in-one-piece"])
async def test_an_agents_reply_streams_before_its_commit(
    dev_server: DevServer, stream: bool
) -> None:
    name = f"echo-{uuid.uuid4().hex[:8]}"
    agent = agents.Agent(name="echo", model=OfflineAgentModel(token_delay=0.01))
    async with (
        fresh_database("sqlite", "agents-stream") as url,
        running_env(dev_server, url, agents={name: OpenAIAgentTurn(agent, stream=stream)}) as env,
    ):
        store = await open_store(url)
        try:
            sessions = env.new_client(store=store)
            events = [e async for e in sessions.stream(name, "s", LONG, turn_id="a1")]
            again = await sessions.send(name, "s", "and again", turn_id="a2")
        finally:
            await store.close()
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert final.result.reply.content == f'You said: "{LONG}"'
    assert replayed_text(events) == final.result.reply.content
    texts = sum(isinstance(e, TextEvent) for e in events)
    # Streamed: word by word; not streamed: the whole reply from the commit.
    assert texts >= 3 if stream else texts == 1
    assert again.turn == 2


def test_stream_must_be_a_flag() -> None:
    with pytest.raises(ValueError):
        OpenAIAgentTurn(agents.Agent(name="x"), stream="yes")  # type: ignore[arg-type]
