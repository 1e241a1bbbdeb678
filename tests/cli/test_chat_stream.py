"""``statecore chat`` streaming: the reply as it is generated (read from the database), one JSON
line per event with ``--json``, and ``--no-stream`` for the reply in one piece."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from statecore.llm import OfflineModel
from statecore.temporal._devserver import DevServer
from tests.cli.conftest import CliEnv, statecore
from tests.dbs import fresh_database
from tests.temporal.conftest import running_env

LONG = " ".join(f"word{i}" for i in range(30))


@pytest.fixture(scope="module")
async def slow_cli(dev_server: DevServer) -> AsyncIterator[CliEnv]:
    """A worker whose model streams a word every 20 ms."""
    async with (
        fresh_database("sqlite", "cli-stream") as url,
        running_env(dev_server, url, models={"default": OfflineModel(token_delay=0.02)}) as env,
    ):
        yield CliEnv(env=env, server=dev_server)


async def test_json_lines_are_the_events_and_end_with_the_result(slow_cli: CliEnv) -> None:
    done = await slow_cli.run("--json", "chat", slow_cli.agent, "js", "--stream", stdin=LONG + "\n")
    assert done.code == 0, done.err
    lines = done.json_lines()
    kinds = [line["type"] for line in lines]
    assert kinds[-1] == "final" and kinds.count("final") == 1
    assert kinds.count("text") >= 3, kinds  # in pieces, as generated
    final = lines[-1]
    assert final["turn"] == 1 and final["turn_id"].startswith("cli-")
    text = "".join(line["text"] for line in lines if line["type"] == "text")
    assert text == final["reply"]["content"]
    # Each event names its position, to resume from.
    assert all("position" in line for line in lines[:-1])


async def test_text_is_printed_as_generated_and_whole(slow_cli: CliEnv) -> None:
    done = await slow_cli.run("chat", slow_cli.agent, "txt", "--stream", stdin=LONG + "\n")
    assert done.code == 0, done.err
    assert done.out.endswith('"\n') and LONG in done.out
    plain = await slow_cli.run("chat", slow_cli.agent, "plain", "--no-stream", stdin=LONG + "\n")
    assert plain.code == 0, plain.err
    # The same reply either way (a fresh session, so the same context report); the printer
    # of whole replies wraps them at the pipe's width, the stream writes them as they come.
    assert plain.out.split() == done.out.split()


async def test_no_stream_json_is_the_result_alone(slow_cli: CliEnv) -> None:
    done = await slow_cli.run("--json", "chat", slow_cli.agent, "ns", "--no-stream", stdin="hi\n")
    assert done.code == 0, done.err
    [result] = done.json_lines()
    assert result["turn"] == 1 and "type" not in result


async def test_streaming_without_a_database_says_why(slow_cli: CliEnv, tmp_path: object) -> None:
    options = slow_cli.options
    missing = [
        *options[: options.index("--database-url")],
        "--database-url",
        f"sqlite+aiosqlite:///{tmp_path}/none.db",
    ]

    done = await statecore(*missing, "chat", slow_cli.agent, "nodb", "--stream", stdin="hi\n")
    assert done.code != 0 and "no SQLite database" in done.err
