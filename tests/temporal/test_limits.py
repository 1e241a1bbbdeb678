"""Limits at the real entry points: the Python client and the `temporal` CLI against a live
session. A refused request writes nothing to history, and the next turn is answered at once."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from statecore.core.errors import InvalidIdentifierError
from statecore.core.identifiers import MAX_ID_LENGTH
from statecore.temporal.devserver import DevServer
from tests.temporal.conftest import Env, temporal_cli

pytestmark = pytest.mark.temporal

#: "At once": a wedged workflow task is retried after about 10 s; a healthy turn takes well
#: under a second on the offline model.
AT_ONCE = 8


async def _event_count(env: Env, workflow_id: str) -> int:
    handle = env.client.get_workflow_handle(workflow_id)
    return len((await handle.fetch_history()).events)


@pytest.mark.parametrize("turn_id", ["t" * (MAX_ID_LENGTH + 1), "turn:1"])
async def test_a_bad_turn_id_is_refused_before_acceptance(
    env: Env, dev_server: DevServer, turn_id: str
) -> None:
    sessions = env.sessions
    await sessions.send(env.agent, "ids", "hello", turn_id="first")
    workflow_id = sessions.workflow_id(env.agent, "ids")
    before = await _event_count(env, workflow_id)

    with pytest.raises(InvalidIdentifierError):
        await sessions.send(env.agent, "ids", "hi", turn_id=turn_id)

    # The operator's way: the real temporal CLI with a raw JSON input.
    done = await asyncio.to_thread(
        subprocess.run,
        [
            *temporal_cli(dev_server),
            "workflow",
            "update",
            "execute",
            "--workflow-id",
            workflow_id,
            "--name",
            "send_message",
            "--input",
            f'{{"turn_id": "{turn_id}", "content": "hi"}}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "InvalidIdentifier" in done.stdout + done.stderr
    # A validator's refusal writes nothing to history.
    assert await _event_count(env, workflow_id) == before

    async with asyncio.timeout(AT_ONCE):
        result = await sessions.send(env.agent, "ids", "still here", turn_id="second")
    assert result.turn == 2
