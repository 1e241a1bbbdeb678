"""A send naming a model no worker has is refused, and the name does not stick: the session
its refused first turn opened ends with the refusal, so the next plain send is answered."""

from __future__ import annotations

import pytest

from statecore.core.errors import UnknownAgentError
from tests.temporal.conftest import Env

pytestmark = pytest.mark.temporal


async def test_a_mistyped_model_refuses_its_turn_and_the_next_send_is_answered(
    env: Env,
) -> None:
    with pytest.raises(UnknownAgentError) as refused:
        await env.sessions.send(env.agent, "typo", "hello", model="gpt-5-typo")
    assert "'gpt-5-typo'" in refused.value.message
    assert "--model" in refused.value.message and "model=" in refused.value.message

    answered = await env.sessions.send(env.agent, "typo", "hello again")
    assert answered.turn == 1
    assert 'You said: "hello again"' in answered.reply.content
    again = await env.sessions.send(env.agent, "typo", "and once more")
    assert again.turn == 2


async def test_a_mistyped_model_on_an_open_session_changes_nothing(env: Env) -> None:
    """A session that already took turns keeps its model: a send naming another one runs on
    the session's own (the options of a send only apply when it opens the session)."""
    first = await env.sessions.send(env.agent, "open", "one")
    second = await env.sessions.send(env.agent, "open", "two", model="gpt-5-typo")
    assert (first.turn, second.turn) == (1, 2)
    report = await env.sessions.describe(env.agent, "open")
    assert report.checkpoint.status == "active"
