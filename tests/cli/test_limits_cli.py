"""The `statecore` command refuses a request over the payload limit before sending it, with
the typed error's code, and the session goes on answering."""

from __future__ import annotations

import pytest

from tests.cli.conftest import CliEnv, assert_one_line_error

pytestmark = pytest.mark.temporal


async def test_chat_refuses_a_line_over_the_payload_limit(cli: CliEnv) -> None:
    done = await cli.run("--json", "chat", cli.agent, "limits", stdin="hello\n")
    assert done.code == 0, done.err
    big = "x" * 100_000 + "\n"
    refused = await cli.run(
        "--payload-limit", "65536", "--json", "chat", cli.agent, "limits", stdin=big
    )
    assert_one_line_error(refused, 2)
    error = refused.error()
    assert error["code"] == "PayloadTooLarge"
    assert "65536" in error["message"] and "KV or scoped state" in error["message"]
    after = await cli.run("--json", "chat", cli.agent, "limits", stdin="still here\n", within=30)
    assert after.code == 0, after.err
    assert after.json_lines()[0]["turn"] == 2


async def test_a_payload_limit_below_any_request_is_a_usage_error(cli: CliEnv) -> None:
    done = await cli.run("--payload-limit", "100", "chat", cli.agent, "tiny", stdin="hi\n")
    assert_one_line_error(done, 2)
    assert "payload_limit_bytes" in done.err


async def test_chat_refuses_a_line_that_can_never_fit(cli: CliEnv) -> None:
    done = await cli.run("--json", "chat", cli.agent, "budget", stdin="hello\n")
    assert done.code == 0, done.err
    never_fits = "é" * 130_000 + "\n"  # 130,000 tokens; the offline model's budget is 123,904
    # Told the model's window, the command refuses the line before sending it ...
    told = await cli.run(
        "--context-window", "2000", "--json", "chat", cli.agent, "budget", stdin=never_fits
    )
    assert_one_line_error(told, 2)
    assert told.error()["code"] == "ContextBudgetExceeded"
    assert "budget is 1500" in told.error()["message"]
    # ... and without it the session refuses it before accepting it, by its worker's budget.
    untold = await cli.run("--json", "chat", cli.agent, "budget", stdin=never_fits)
    assert_one_line_error(untold, 2)
    assert untold.error()["code"] == "ContextBudgetExceeded"
    assert "budget is 123904" in untold.error()["message"]
    after = await cli.run("--json", "chat", cli.agent, "budget", stdin="still here\n", within=30)
    assert after.code == 0, after.err
    assert after.json_lines()[0]["turn"] == 2


@pytest.mark.parametrize("window", ["0", "lots"])
async def test_a_context_window_that_is_no_count_of_tokens_is_a_usage_error(
    cli: CliEnv, window: str
) -> None:
    done = await cli.run("--context-window", window, "chat", cli.agent, "window", stdin="hi\n")
    assert_one_line_error(done, 2)
    assert "--context-window" in done.err
