"""Export and import through the real program: files, stdout, live sessions, other databases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import CliEnv, assert_one_line_error, eventually, statecore
from tests.dbs import fresh_database
from tests.temporal.conftest import running_env

pytestmark = pytest.mark.temporal


def counts(report: dict) -> dict[str, tuple[bool, int, int | None]]:
    return {s["name"]: (s["exists"], s["items"], s["tokens"]) for s in report["stores"]}


async def described_from(url: str, agent: str, session: str) -> dict:
    done = await statecore("--database-url", url, "--json", "describe", "--db", agent, session)
    assert done.code == 0, done.err
    return done.json()


async def test_session_moves_from_sqlite_to_postgresql_and_continues(
    cli: CliEnv, tmp_path: Path
) -> None:
    agent = cli.agent
    lines = "my name is Ada\nI like tea\nremember the number 42\n"
    assert (await cli.run("chat", agent, "move", stdin=lines)).code == 0
    assert (await cli.run("hint", agent, "move", "be concise")).code == 0
    bundle = tmp_path / "move.json"

    async def exported_with_hint() -> bool:
        done = await cli.run("--json", "export", agent, "move", "-o", str(bundle))
        assert done.code == 0, done.err
        return bool(json.loads(bundle.read_text())["content"]["hints"])

    await eventually(exported_with_hint)
    summary = (await cli.run("--json", "export", agent, "move", "-o", str(bundle))).json()
    assert summary["format"] == "session" and summary["messages"] == 6

    async with fresh_database("postgresql", "cliimp") as pg_url:
        target = ["--address", cli.server.address, "--database-url", pg_url]
        unmigrated = await statecore(*target, "import", str(bundle))
        assert_one_line_error(unmigrated, 1)
        assert "statecore db upgrade" in unmigrated.err
        assert (await statecore(*target, "db", "upgrade")).code == 0

        # The source's workflow is still running: importing under its id is refused.
        live = await statecore(*target, "--json", "import", str(bundle))
        assert live.code == 4 and "running workflow" in live.error()["message"]
        assert (await cli.run("close", agent, "move")).code == 0
        handle = cli.env.sessions.handle(agent, "move")

        async def closed() -> bool:
            return (await handle.describe()).status.name == "COMPLETED"

        await eventually(closed)
        imported = await statecore(*target, "--json", "import", str(bundle))
        assert imported.code == 0, imported.err
        assert imported.json()["operation"] == "import"

        source = await described_from(cli.env.database_url, agent, "move")
        copy = await described_from(pg_url, agent, "move")
        assert counts(copy) == counts(source)
        assert counts(copy)["conversation"][1] == 6

        again = await statecore(*target, "import", str(bundle))
        assert_one_line_error(again, 4)
        assert "--replace" in again.err

        # A worker on PostgreSQL picks the session up where SQLite left it.
        async with running_env(cli.server, pg_url) as pg:
            turn = await statecore(
                "--address",
                cli.server.address,
                "--task-queue",
                pg.task_queue,
                "--json",
                "chat",
                agent,
                "move",
                stdin="what is my name?\n",
            )
            assert turn.code == 0, turn.err
            (result,) = turn.json_lines()
            assert result["turn"] == 4
            assert "user messages: 4," in result["reply"]["content"]
            assert "hints: 1." in result["reply"]["content"]
            after = await described_from(pg_url, agent, "move")
            assert counts(after)["conversation"][1] == 8


async def test_import_under_another_id_and_namespace_bundles(cli: CliEnv, tmp_path: Path) -> None:
    agent = cli.agent
    assert (await cli.run("chat", agent, "orig", stdin="alpha\nbeta\n")).code == 0
    file = tmp_path / "orig.json"
    assert (await cli.run("export", agent, "orig", "-o", str(file))).code == 0
    copy = await cli.run("--json", "import", str(file), "--as", agent, "copy")
    assert copy.code == 0, copy.err
    original = await described_from(cli.env.database_url, agent, "orig")
    renamed = await described_from(cli.env.database_url, agent, "copy")
    assert counts(renamed) == counts(original)
    turn = await cli.run("chat", agent, "copy", stdin="gamma\n")
    assert turn.code == 0 and "user messages: 3," in turn.out

    # The whole namespace to stdout, then into an empty database.
    everything = await cli.run("export", "--all")
    assert everything.code == 0, everything.err
    envelope = json.loads(everything.out)
    assert envelope["content"]["format"].endswith("namespace")
    sessions = {
        (s["ref"]["agent_id"], s["ref"]["session_id"]) for s in envelope["content"]["sessions"]
    }
    assert {(agent, "orig"), (agent, "copy")} <= sessions
    dump = tmp_path / "all.json"
    dump.write_text(everything.out)
    async with fresh_database("sqlite", "cliall") as other:
        target = ["--address", cli.server.address, "--database-url", other]
        assert (await statecore(*target, "db", "upgrade")).code == 0
        # Its sessions' workflows are running against the first database.
        live = await statecore(*target, "import", str(dump))
        assert_one_line_error(live, 4)
        loaded = await statecore(*target, "--json", "import", str(dump), "--no-live-check")
        assert loaded.code == 0, loaded.err
        assert counts(await described_from(other, agent, "copy")) == counts(
            await described_from(cli.env.database_url, agent, "copy")
        )
        renamed = await statecore(*target, "import", str(dump), "--as", agent, "x")
        assert_one_line_error(renamed, 2)


async def test_damaged_bundles_are_bad_arguments_and_change_nothing(
    cli: CliEnv, tmp_path: Path
) -> None:
    assert (await cli.run("chat", cli.agent, "safe", stdin="keep me\n")).code == 0
    file = tmp_path / "safe.json"
    assert (await cli.run("export", cli.agent, "safe", "-o", str(file))).code == 0
    text = file.read_text()
    tampered = tmp_path / "tampered.json"
    tampered.write_text(text.replace("keep me", "keep it"))
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[: len(text) // 2])
    for damaged in (tampered, truncated):
        done = await cli.run("import", str(damaged), "--as", cli.agent, "safe2", "--replace")
        assert_one_line_error(done, 2)
    assert_one_line_error(await cli.run("describe", "--db", cli.agent, "safe2"), 3)
    unwritable = await cli.run("export", cli.agent, "safe", "-o", str(tmp_path / "no" / "f.json"))
    assert_one_line_error(unwritable, 2)
