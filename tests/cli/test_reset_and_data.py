"""`statecore reset` asks before it deletes, and `describe --data` shows the data to people."""

from __future__ import annotations

import asyncio
import os
import pty

import pytest

from tests.cli.conftest import STATECORE, CliEnv, cli_environment
from tests.cli.test_session_commands import stored_messages

pytestmark = pytest.mark.temporal


async def _on_a_terminal(cli: CliEnv, *args: str, answer: str) -> tuple[int, str]:
    """Run the program with a terminal as its stdin, typing ``answer`` when it asks."""
    leader, follower = pty.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            STATECORE,
            *cli.options,
            *args,
            stdin=follower,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=cli_environment(),
        )
        os.write(leader, answer.encode() + b"\n")
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


async def test_reset_asks_first_unless_yes(cli: CliEnv) -> None:
    assert (await cli.run("chat", cli.agent, "ask", stdin="hello\nagain\n")).code == 0
    url = cli.env.database_url

    piped = await cli.run("reset", cli.agent, "ask")  # no terminal to ask on
    assert piped.code == 4 and "--yes" in piped.err
    code, text = await _on_a_terminal(cli, "reset", cli.agent, "ask", answer="n")
    assert code == 4 and "delete every store of session" in text
    assert len(await stored_messages(url, cli.agent, "ask")) == 4  # nothing cleared

    code, text = await _on_a_terminal(
        cli, "reset", cli.agent, "ask", "--stores", "kv", answer="yes"
    )
    assert code == 0 and "delete kv of session" in text
    assert len(await stored_messages(url, cli.agent, "ask")) == 4

    done = await cli.run("--json", "reset", cli.agent, "ask", "--yes")
    assert done.code == 0, done.err
    assert "conversation" in done.json()["cleared"]
    assert await stored_messages(url, cli.agent, "ask") == []


async def test_describe_data_prints_the_data_without_json(cli: CliEnv) -> None:
    assert (await cli.run("chat", cli.agent, "shown", stdin="the cat sat\n")).code == 0
    plain = await cli.run("describe", cli.agent, "shown")
    assert plain.code == 0 and "the cat sat" not in plain.out
    for extra in ((), ("--db",)):
        with_data = await cli.run("describe", cli.agent, "shown", "--data", *extra)
        assert with_data.code == 0, with_data.err
        assert "conversation data:" in with_data.out
        assert "the cat sat" in with_data.out and '"role": "assistant"' in with_data.out
