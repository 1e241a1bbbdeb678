"""Talking to and operating sessions through the real program, with a real worker."""

from __future__ import annotations

import pytest

from statecore.core._models import SessionRef
from statecore.store import open_store
from tests.cli.conftest import CliEnv, Done, assert_one_line_error, eventually, statecore
from tests.dbs import fresh_database
from tests.temporal.conftest import running_env

pytestmark = pytest.mark.temporal


async def stored_messages(url: str, agent: str, session: str) -> list:
    store = await open_store(url)
    try:
        async with store.transaction() as tx:
            return await tx.conversation.messages(SessionRef(agent_id=agent, session_id=session))
    finally:
        await store.close()


async def describe(cli: CliEnv, session: str, *extra: str) -> dict:
    done = await cli.run("--json", "describe", cli.agent, session, *extra)
    assert done.code == 0, done.err
    return done.json()


async def listed(cli: CliEnv, *filters: str) -> list[dict]:
    done = await cli.run("sessions", "list", "--agent", cli.agent, *filters, "--json")
    assert done.code == 0, done.err
    return done.json()


async def test_chat_turns_from_stdin_and_describe_from_workflow_and_database(
    cli: CliEnv,
) -> None:
    chat = await cli.run("chat", cli.agent, "talk", stdin="hello there\n\nsecond line\n")
    assert chat.code == 0, chat.err
    replies = chat.out.splitlines()
    assert len(replies) == 2  # the empty line is not a turn
    assert 'You said: "hello there"' in replies[0]
    assert "user messages: 2," in replies[1]  # the second turn saw the first

    turns = await cli.run("chat", cli.agent, "talk", "--json", stdin="third\n/quit\nignored\n")
    assert turns.code == 0, turns.err
    (result,) = turns.json_lines()
    assert result["turn"] == 3 and result["reply"]["role"] == "assistant"
    assert result["turn_id"].startswith("cli-") and result["duplicate"] is False

    report = await describe(cli, "talk")
    assert report["checkpoint"]["turn"] == 3
    assert report["checkpoint"]["status"] == "active"
    conversation = next(s for s in report["stores"] if s["name"] == "conversation")
    assert conversation["items"] == 6
    stored = await stored_messages(cli.env.database_url, cli.agent, "talk")
    assert [m.content for m in stored if m.role == "user"] == [
        "hello there",
        "second line",
        "third",
    ]
    from_db = await describe(cli, "talk", "--db", "--data")
    db_conversation = next(s for s in from_db["stores"] if s["name"] == "conversation")
    assert db_conversation["items"] == 6 and db_conversation["tokens"] == conversation["tokens"]
    assert len(db_conversation["data"]["messages"]) == 6

    human = await cli.run("describe", cli.agent, "talk")
    assert human.code == 0 and "status active, turn 3" in human.out


async def test_unknown_session_exits_3(cli: CliEnv) -> None:
    for args in (
        ["describe", cli.agent, "never"],
        ["pause", cli.agent, "never"],
        ["reset", cli.agent, "never", "--yes"],
        ["describe", "--db", cli.agent, "never"],
        ["export", cli.agent, "never"],
    ):
        done = await cli.run(*args)
        assert_one_line_error(done, 3)
    as_json = await cli.run("--json", "describe", cli.agent, "never")
    assert as_json.code == 3 and as_json.error()["code"] == "SessionNotFound"


async def test_paused_session_refuses_turns_with_exit_4_until_resumed(cli: CliEnv) -> None:
    assert (await cli.run("chat", cli.agent, "nap", stdin="before\n")).code == 0
    paused = await cli.run("--json", "pause", cli.agent, "nap", "--reason", "budget review")
    assert paused.code == 0 and paused.json()["signal"] == "pause"

    async def is_paused() -> bool:
        return (await describe(cli, "nap"))["checkpoint"]["status"] == "paused"

    await eventually(is_paused)
    refused = await cli.run("--json", "chat", cli.agent, "nap", stdin="during\n")
    assert refused.code == 4
    assert refused.error()["code"] == "SessionPaused"
    assert "budget review" in refused.error()["message"]
    found = await eventually(lambda: listed(cli, "--status", "paused"))
    assert [(s["session_id"], s["status"], s["turn"]) for s in found] == [("nap", "paused", 1)]

    assert (await cli.run("resume", cli.agent, "nap")).code == 0
    await eventually(lambda: _status_is(cli, "nap", "active"))
    after = await cli.run("chat", cli.agent, "nap", stdin="after\n")
    assert after.code == 0 and "user messages: 2," in after.out
    stored = await stored_messages(cli.env.database_url, cli.agent, "nap")
    assert [m.content for m in stored if m.role == "user"] == ["before", "after"]


async def _status_is(cli: CliEnv, session: str, status: str) -> bool:
    return (await describe(cli, session))["checkpoint"]["status"] == status


async def test_hint_compact_and_reset(cli: CliEnv) -> None:
    lines = "".join(f"note {i}\n" for i in range(4))
    assert (await cli.run("chat", cli.agent, "ops", stdin=lines)).code == 0
    assert (await cli.run("hint", cli.agent, "ops", "answer in French")).code == 0

    async def hinted() -> bool:
        stores = (await describe(cli, "ops"))["stores"]
        conversation = next(s for s in stores if s["name"] == "conversation")
        return conversation["metadata"].get("hints") == 1

    await eventually(hinted)
    with_hint = await cli.run("chat", cli.agent, "ops", stdin="with hint?\n")
    assert "hints: 1." in with_hint.out  # the model's context carries the hint

    compacted = await cli.run(
        "--json", "compact", cli.agent, "ops", "--strategy", "recent", "--max-messages", "2"
    )
    assert compacted.code == 0, compacted.err
    report = compacted.json()
    assert report["compacted"] == ["conversation"]
    conversation = next(s for s in report["stores"] if s["name"] == "conversation")
    assert conversation["metadata"]["window_messages"] == 2
    assert conversation["metadata"]["window_start_seq"] == 9
    assert conversation["items"] == 10  # compaction never deletes

    partial = await cli.run("--json", "reset", cli.agent, "ops", "--stores", "kv", "flow", "--yes")
    assert partial.code == 0, partial.err
    assert partial.json()["missing"] == ["kv", "flow"] and partial.json()["cleared"] == []
    whole = await cli.run("--json", "reset", cli.agent, "ops", "--stores", "conversation", "--yes")
    assert whole.code == 0 and whole.json()["cleared"] == ["conversation"]
    assert await stored_messages(cli.env.database_url, cli.agent, "ops") == []


async def test_migrate_moves_the_workflow_to_another_queue(cli: CliEnv) -> None:
    assert (await cli.run("chat", cli.agent, "mover", stdin="here\n")).code == 0
    target = cli.env.task_queue + "-next"
    done = await cli.run("migrate", cli.agent, "mover", "--task-queue", target)
    assert done.code == 0, done.err
    handle = cli.env.sessions.handle(cli.agent, "mover")

    async def moved() -> bool:
        return (await handle.describe()).task_queue == target

    await eventually(moved)


async def test_close_then_signals_exit_4_and_a_message_reopens(cli: CliEnv) -> None:
    assert (await cli.run("chat", cli.agent, "shut", stdin="one\n")).code == 0
    assert (await cli.run("close", cli.agent, "shut")).code == 0

    async def listed_closed() -> list[dict]:
        rows = await listed(cli, "--status", "closed")
        return [r for r in rows if r["execution"] == "completed"]

    found = await eventually(listed_closed)
    assert [s["session_id"] for s in found] == ["shut"]
    refused = await cli.run("pause", cli.agent, "shut")
    assert_one_line_error(refused, 4)
    assert "is closed" in refused.err
    reopened = await cli.run("chat", cli.agent, "shut", stdin="two\n")
    assert reopened.code == 0 and "user messages: 2," in reopened.out  # state came from SQL
    running = await eventually(lambda: _listed_running(cli, "shut"))
    # The listed turn is StatecoreTurn as of its last upsert: the new run's start wrote the
    # exact turn 1; turn 2 alone writes nothing (every 10th turn does).
    assert running["status"] == "active" and running["turn"] == 1


async def _listed_running(cli: CliEnv, session: str) -> dict | None:
    rows = [r for r in await listed(cli) if r["session_id"] == session]
    # The reopened session is listed once: its newest run.
    assert len(rows) == 1, rows
    return rows[0] if rows[0]["execution"] == "running" else None


async def test_close_with_delete_state_and_sweep_of_expired_sessions(cli: CliEnv) -> None:
    assert (await cli.run("chat", cli.agent, "gone", stdin="bye\n")).code == 0
    assert (await cli.run("close", cli.agent, "gone", "--delete-state")).code == 0

    async def deleted() -> Done | None:
        done = await cli.run("describe", "--db", cli.agent, "gone")
        return done if done.code == 3 else None

    await eventually(deleted)

    short = await cli.run("chat", cli.agent, "brief", "--ttl-seconds", "1", stdin="quick\n")
    assert short.code == 0, short.err
    handle = cli.env.sessions.handle(cli.agent, "brief")

    async def closed_by_ttl() -> bool:
        return (await handle.describe()).status.name == "COMPLETED"

    await eventually(closed_by_ttl)
    swept = await cli.run("--json", "sweep")
    assert swept.code == 0, swept.err
    refs = [(r["agent_id"], r["session_id"]) for r in swept.json()["sessions"]]
    assert (cli.agent, "brief") in refs
    assert (cli.agent, "talk") not in refs  # not idle past its TTL
    assert_one_line_error(await cli.run("describe", "--db", cli.agent, "brief"), 3)


async def test_state_namespaces_are_separate_tenants(cli: CliEnv) -> None:
    assert (await cli.run("chat", cli.agent, "tenant", stdin="default one\n")).code == 0
    other = ["--state-namespace", "tenant-b"]
    chat = await cli.run(*other, "chat", cli.agent, "tenant", stdin="b one\nb two\n")
    assert chat.code == 0 and "user messages: 2," in chat.out.splitlines()[1]
    assert (await describe(cli, "tenant"))["checkpoint"]["turn"] == 1
    tenant_b = await describe(cli, "tenant", *other)
    assert tenant_b["checkpoint"]["turn"] == 2 and tenant_b["namespace"] == "tenant-b"

    async def listed_in_b() -> list[dict]:
        return [r for r in await listed(cli, *other) if r["session_id"] == "tenant"]

    (row,) = await eventually(listed_in_b)
    # StatecoreTurn as of its last upsert: the session's first turn (the second is not one).
    assert (row["namespace"], row["turn"]) == ("tenant-b", 1)
    everyone = [r for r in await listed(cli) if r["session_id"] == "tenant"]
    assert sorted(r["namespace"] for r in everyone) == ["default", "tenant-b"]
    stored = await stored_messages(cli.env.database_url, cli.agent, "tenant")
    assert [m.content for m in stored if m.role == "user"] == ["default one"]


async def test_encrypted_sessions_need_the_same_keyring(cli: CliEnv) -> None:
    from statecore.temporal._encryption import EncryptionCodec, Keyring, generate_key

    keys = f"k1:{generate_key()}"
    async with (
        fresh_database("sqlite", "clienc") as url,
        running_env(cli.server, url, codec=EncryptionCodec(Keyring.parse(keys))) as sealed,
    ):
        options = ["--address", cli.server.address, "--task-queue", sealed.task_queue]
        with_keys = {"STATECORE_ENCRYPTION_KEYS": keys}
        chat = await statecore(
            *options, "chat", sealed.agent, "secret", stdin="top secret\n", env=with_keys
        )
        assert chat.code == 0, chat.err
        assert 'You said: "top secret"' in chat.out
        report = await statecore(
            *options, "--json", "describe", sealed.agent, "secret", env=with_keys
        )
        assert report.code == 0 and report.json()["checkpoint"]["turn"] == 1
        # Without the keyring the sealed report cannot be read: an error, not ciphertext.
        blind = await statecore(*options, "describe", sealed.agent, "secret", within=60)
        assert_one_line_error(blind, 1)
        assert "STATECORE_ENCRYPTION_KEYS" in blind.err and "top secret" not in blind.out
        bad = await statecore(
            *options,
            "describe",
            sealed.agent,
            "secret",
            env={"STATECORE_ENCRYPTION_KEYS": "k1:not-a-key"},
        )
        assert_one_line_error(bad, 2)
