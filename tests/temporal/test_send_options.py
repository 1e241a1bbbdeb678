"""What a send names that the session does not follow: a model no worker has is refused and
does not stick (the session its refused first turn opened ends with the refusal, so the next
plain send is answered); a task queue other than the session's is named in a warning."""

from __future__ import annotations

import warnings

import pytest

from statecore import AgentSessionClient
from statecore.core._errors import UnknownAgentError
from statecore.temporal._queue_check import SessionQueueWarning
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


async def test_a_send_to_a_session_on_another_queue_warns_naming_both(env: Env) -> None:
    """The session opened on the env's queue; a client of another queue reaches it there
    (answered by that queue's worker) and is told so once, with the way to move it."""
    await env.sessions.send(env.agent, "moved", "one")
    elsewhere = AgentSessionClient(env.client, task_queue="my-own-queue")
    with pytest.warns(SessionQueueWarning) as warned:
        await elsewhere.send(env.agent, "moved", "two")
    text = str(warned[0].message)
    assert f"'{env.task_queue}'" in text and "'my-own-queue'" in text and "migrate" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await elsewhere.send(env.agent, "moved", "three")  # once per session and client
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await env.sessions.send(env.agent, "moved", "four")  # the session's own queue: quiet
