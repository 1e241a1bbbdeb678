"""The program without a session: help, bad arguments, unreachable services, ``db upgrade``."""

from __future__ import annotations

from pathlib import Path

from statecore.store._migrate import HEAD_REVISION, current_revision
from statecore.temporal._devserver import free_port
from tests.cli.conftest import assert_one_line_error, statecore
from tests.dbs import fresh_database

COMMANDS = [
    "dev",
    "worker",
    "chat",
    "sessions",
    "describe",
    "reset",
    "compact",
    "pause",
    "resume",
    "hint",
    "migrate",
    "close",
    "export",
    "import",
    "db",
    "sweep",
]


async def test_help_names_every_command_and_the_exit_codes() -> None:
    done = await statecore("--help")
    assert done.code == 0
    for command in COMMANDS:
        assert f"    {command} " in done.out, command
    for line in ("2  bad arguments", "3  not found", "4  refused by the session", "5  cannot"):
        assert line in done.out
    sub = await statecore("reset", "--help")
    assert sub.code == 0 and "--stores" in sub.out and "--database-url" in sub.out
    assert "4  refused by the session" in sub.out


async def test_bad_arguments_exit_2_with_one_line() -> None:
    cases = [
        ["frobnicate"],
        ["describe", "bad id", "s"],
        ["describe", "only-agent"],
        ["reset", "a", "s", "--stores", "conversation,bogus"],
        ["compact", "a", "s", "--strategy", "shrink"],
        ["compact", "a", "s", "--max-tokens", "0"],
        ["migrate", "a", "s"],  # --task-queue is required here
        ["hint", "a", "s", "   "],
        ["export", "a", "s", "--all"],
        ["export"],
        ["import", "/no/such/bundle.json"],
        ["sessions", "list", "--status", "sleeping"],
        ["--timeout", "soon", "sweep"],
    ]
    for args in cases:
        # A dead address and database: bad arguments must fail before any connection.
        done = await statecore(
            "--address", "127.0.0.1:1", "--database-url", "sqlite:////nonexistent/x.db", *args
        )
        assert_one_line_error(done, 2)
        assert done.err.startswith("statecore: error: "), done.err


async def test_json_errors_are_json_on_stderr() -> None:
    usage = await statecore("--json", "reset", "a", "s", "--stores", "bogus")
    assert usage.code == 2 and usage.out == ""
    assert usage.error()["message"].startswith("unknown store(s) bogus")
    parse = await statecore("describe", "a", "--json")
    assert parse.code == 2 and parse.error()["code"] == "Usage"


async def test_unreachable_temporal_and_database_exit_5(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    done = await statecore("--address", dead, "describe", "a", "s")
    assert_one_line_error(done, 5)
    assert f"cannot reach Temporal at {dead}" in done.err
    listing = await statecore("--address", dead, "--json", "sessions", "list")
    assert listing.code == 5 and listing.error()["code"] == "Unreachable"

    postgres_down = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    done = await statecore("--database-url", postgres_down, "sweep")
    assert_one_line_error(done, 5)
    assert "cannot reach the database" in done.err

    missing = tmp_path / "missing.db"
    done = await statecore("--database-url", f"sqlite:///{missing}", "export", "a", "s")
    assert_one_line_error(done, 5)
    assert not missing.exists(), "reading must not create an empty database"


async def test_db_upgrade_creates_a_fresh_sqlite_database_and_is_idempotent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "nested" / "dir" / "state.db"
    url = f"sqlite:///{path}"
    first = await statecore("--database-url", url, "--json", "db", "upgrade")
    assert first.code == 0, first.err
    assert first.json() == {
        "database": f"sqlite+aiosqlite:///{path}",
        "previous": None,
        "revision": HEAD_REVISION,
    }
    assert await current_revision(f"sqlite+aiosqlite:///{path}") == HEAD_REVISION
    again = await statecore("--database-url", url, "db", "upgrade")
    assert again.code == 0 and f"already at revision {HEAD_REVISION}" in again.out
    # The schema is usable: a sweep of the empty database finds nothing.
    swept = await statecore("--database-url", url, "--json", "sweep")
    assert swept.code == 0 and swept.json() == {"sessions": [], "kv_keys": 0}


async def test_db_upgrade_on_postgresql() -> None:
    async with fresh_database("postgresql", "cliup") as url:
        assert await current_revision(url) is None
        done = await statecore("db", "upgrade", "--database-url", url, "--json")
        assert done.code == 0, done.err
        assert done.json()["previous"] is None
        assert done.json()["revision"] == HEAD_REVISION
        assert await current_revision(url) == HEAD_REVISION
