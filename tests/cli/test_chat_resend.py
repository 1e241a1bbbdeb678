"""``statecore chat --turn-id ID --resend TEXT``: the way chat offers, after Ctrl-C, to send an
unanswered line again with its turn id; sent twice, the turn commits once."""

from __future__ import annotations

import argparse

from statecore.cli._chat import resend_command
from tests.cli.conftest import CliEnv, assert_one_line_error


async def test_a_resent_turn_commits_once_and_returns_its_reply(cli: CliEnv) -> None:
    resend = ["--turn-id", "cli-resend-1", "--resend", "where is my order?"]
    first = await cli.run("--json", "chat", cli.agent, "resend", *resend, stdin="")
    assert first.code == 0, first.err
    [answered] = first.json_lines()
    assert answered["turn"] == 1 and answered["duplicate"] is False

    again = await cli.run("--json", "chat", cli.agent, "resend", *resend, stdin="and then?\n")
    assert again.code == 0, again.err
    duplicate, after = again.json_lines()
    # The same result (Temporal returns the update's recorded outcome, or the turn record
    # does), and nothing committed twice: the next line is turn 2.
    assert duplicate["turn"] == 1 and duplicate["reply"] == answered["reply"]
    assert after["turn"] == 2


async def test_a_malformed_turn_id_is_a_usage_error(cli: CliEnv) -> None:
    done = await cli.run("chat", cli.agent, "resend", "--turn-id", "no spaces", stdin="")
    assert_one_line_error(done, 2)


def test_the_resend_command_quotes_the_line() -> None:
    args = argparse.Namespace(agent="bot", session="s1")
    command = resend_command(args, "it's 'quoted'", "cli-1")
    assert command.startswith("statecore chat bot s1 --turn-id cli-1 --resend ")
    assert "'\"'\"'" in command  # shell-quoted, pasteable as is
