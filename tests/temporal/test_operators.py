"""The operator contract: signals and queries sent by the real `temporal` CLI, and updates."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from statecore.contract._session import workflow_id_for
from statecore.core._errors import SessionPausedError
from statecore.temporal._devserver import DevServer
from tests.temporal.conftest import Env, temporal_cli


async def cli(dev_server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [*temporal_cli(dev_server), *args]
    return await asyncio.to_thread(
        subprocess.run, cmd, capture_output=True, text=True, timeout=60, check=False
    )


async def signal(dev_server: DevServer, agent: str, session: str, name: str, payload: str | None):
    args = ["workflow", "signal", "--workflow-id", workflow_id_for(agent, session), "--name", name]
    if payload is not None:
        args += ["--input", payload]
    done = await cli(dev_server, *args)
    assert done.returncode == 0, done.stderr


async def query_describe(dev_server: DevServer, agent: str, session: str) -> dict:
    done = await cli(
        dev_server,
        "workflow",
        "query",
        "--workflow-id",
        workflow_id_for(agent, session),
        "--name",
        "describe",
        "--output",
        "json",
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["queryResult"][0]


async def wait_for(predicate, *, within: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await predicate():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.2)


async def test_workflow_starts_from_the_cli_with_only_ids(env: Env, dev_server: DevServer) -> None:
    done = await cli(
        dev_server,
        "workflow",
        "start",
        "--type",
        "AgentSession",
        "--task-queue",
        env.task_queue,
        "--workflow-id",
        workflow_id_for("cli-agent", "cli-session"),
        "--input",
        '{"agent_id": "cli-agent", "session_id": "cli-session"}',
    )
    assert done.returncode == 0, done.stderr
    result = await env.sessions.send("cli-agent", "cli-session", "hi there")
    assert result.turn == 1
    described = await query_describe(dev_server, "cli-agent", "cli-session")
    assert described["checkpoint"]["turn"] == 1
    assert described["checkpoint"]["status"] == "active"


async def test_pause_rejects_turns_until_resume(env: Env, dev_server: DevServer) -> None:
    await env.sessions.send(env.agent, "pz", "before", turn_id="b1")
    await signal(dev_server, env.agent, "pz", "pause", '{"reason": "maintenance window"}')

    async def paused() -> bool:
        return (await env.sessions.describe(env.agent, "pz")).checkpoint.status == "paused"

    await wait_for(paused)
    with pytest.raises(SessionPausedError, match="maintenance window"):
        await env.sessions.send(env.agent, "pz", "during")
    await signal(dev_server, env.agent, "pz", "resume", None)  # no input at all is valid
    result = await env.sessions.send(env.agent, "pz", "after", turn_id="a1")
    assert result.turn == 2
    described = await query_describe(dev_server, env.agent, "pz")
    assert described["checkpoint"]["status"] == "active"
    assert described["stores"][0]["name"] == "conversation"
    assert described["stores"][0]["items"] == 4


async def test_reset_and_compact_by_cli_signal(env: Env, dev_server: DevServer) -> None:
    for i in range(6):
        await env.sessions.send(env.agent, "rc", f"turn {i} " + "words " * 30, turn_id=f"r{i}")
    await signal(
        dev_server, env.agent, "rc", "compact", '{"strategy": "recent", "max_messages": 4}'
    )

    async def compacted() -> bool:
        return (await env.sessions.describe(env.agent, "rc")).checkpoint.compactions == 1

    await wait_for(compacted)
    fresh = await env.sessions.describe(env.agent, "rc", include_data=True)
    conversation = fresh.store("conversation")
    assert conversation.items == 12  # compaction never deletes the log
    assert conversation.metadata["window_start_seq"] == 9

    await signal(dev_server, env.agent, "rc", "reset", '{"stores": ["conversation"]}')

    async def cleared() -> bool:
        return (await env.sessions.describe(env.agent, "rc")).checkpoint.message_count == 0

    await wait_for(cleared)
    after = await env.sessions.send(env.agent, "rc", "fresh start", turn_id="r-new")
    assert "user messages: 1," in after.reply.content


async def test_reset_and_compact_as_updates_return_reports(env: Env) -> None:
    for i in range(4):
        await env.sessions.send(env.agent, "up", f"hello {i}", turn_id=f"u{i}")
    report = await env.sessions.compact(env.agent, "up", strategy="recent", max_messages=2)
    assert report.operation == "compact"
    assert report.compacted == ["conversation"]
    report = await env.sessions.reset(env.agent, "up", ["conversation"])
    assert report.operation == "reset"
    assert report.cleared == ["conversation"]
    assert report.checkpoint.message_count == 0


@pytest.mark.parametrize(
    ("name", "payload", "code"),
    [
        ("pause", '"not an object"', "InvalidInput"),
        ("pause", '{"reason": 42}', "InvalidInput"),
        ("reset", '{"stores": ["nonsense"]}', "UnknownStore"),
        ("reset", '{"stores": "conversation"}', "InvalidInput"),
        ("compact", '{"strategy": "shred"}', "InvalidInput"),
        ("compact", '{"max_tokens": -1}', "InvalidInput"),
        ("compact", '{"max_messages": "lots"}', "InvalidInput"),
        ("add_hint", "{}", "InvalidInput"),
        ("add_hint", '{"text": ""}', "EmptyContent"),
        ("migrate", '{"task_queue": "../etc"}', "InvalidIdentifier"),
        ("close", '{"delete_state": "yes please"}', "InvalidInput"),
        # Strict types: a destructive flag is only ever the JSON true.
        ("close", '{"delete_state": "yes"}', "InvalidInput"),
        ("close", '{"delete_state": 1}', "InvalidInput"),
        ("compact", '{"max_tokens": "100"}', "InvalidInput"),
        ("compact", '{"max_messages": 2.0}', "InvalidInput"),
        ("resume", "[1, 2]", "InvalidInput"),
    ],
)
async def test_malformed_signals_are_recorded_and_change_nothing(
    env: Env, dev_server: DevServer, name: str, payload: str, code: str
) -> None:
    await env.sessions.send(env.agent, "ms", "hello", turn_id="m1")
    await signal(dev_server, env.agent, "ms", name, payload)

    async def recorded() -> bool:
        return bool((await env.sessions.describe(env.agent, "ms")).rejections)

    await wait_for(recorded)
    report = await env.sessions.describe(env.agent, "ms")
    assert report.rejections[-1].operation == name
    assert report.rejections[-1].code == code
    meta = await env.sessions.handle(env.agent, "ms").query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )
    assert f"last rejection: {name} - {code}" in meta.current_details
    assert report.checkpoint.status == "active"
    assert report.checkpoint.message_count == 2
    after = await env.sessions.send(env.agent, "ms", "still works", turn_id="m2")
    assert after.turn == 2


async def test_describe_query_shape(env: Env, dev_server: DevServer) -> None:
    await env.sessions.send(env.agent, "dq", "hello", turn_id="d1")
    described = await query_describe(dev_server, env.agent, "dq")
    assert described["operation"] == "describe"
    assert described["session_id"] == "dq"
    names = [s["name"] for s in described["stores"]]
    assert names[0] == "conversation"
    assert {"kv", "state", "flow", "orchestration", "tools", "task"} <= set(names)
    for key in ("cleared", "compacted", "missing", "errors"):
        assert not described[key]  # the CLI prints empty lists as null
    assert described["checkpoint"]["turn"] == 1
