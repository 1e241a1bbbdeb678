"""``statecore worker`` (and ``python worker.py``, which runs it): its help, one rule for empty
variables, clear errors for bad values, a turn answered against a dev server, and SIGTERM
stopping it in bounded time."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import DevServer
from tests.cli.conftest import ROOT, STATECORE, assert_one_line_error, cli_environment, statecore
from tests.worker_cli import log_tail, worker_cli

CONNECTION_FLAGS = [
    "--address",
    "--namespace",
    "--api-key",
    "--tls",
    "--tls-cert-path",
    "--tls-key-path",
    "--tls-ca-path",
    "--tls-server-name",
    "--profile",
    "--config-file",
]

#: Every variable the worker reads, set empty the way compose's ${X:-} and .env files do.
EMPTY = {
    name: ""
    for name in (
        "TEMPORAL_NAMESPACE",
        "TEMPORAL_API_KEY",
        "TEMPORAL_TLS",
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
        "TEMPORAL_PROFILE",
        "TEMPORAL_CONFIG_FILE",
        "STATECORE_DATABASE_URL",
        "STATECORE_MODEL",
        "STATECORE_MODEL_BASE_URL",
        "STATECORE_MODEL_API_KEY",
        "STATECORE_ENCODING",
        "STATECORE_ENCRYPTION_KEYS",
        "STATECORE_LOG_LEVEL",
        "STATECORE_LOG_FORMAT",
        "STATECORE_METRICS_PORT",
        "STATECORE_METRICS_HOST",
        "STATECORE_OTEL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    )
}


async def test_worker_help_lists_the_connection_and_worker_flags() -> None:
    done = await statecore("worker", "--help")
    assert done.code == 0, done.err
    for flag in [*CONNECTION_FLAGS, "--dev", "--database-url", "--metrics-port", "--log-format"]:
        assert flag in done.out, flag
    for variable in ("TEMPORAL_API_KEY", "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_PROFILE"):
        assert variable in done.out, variable
    top = await statecore("--help")
    assert "    worker " in top.out
    # worker.py is a thin call of the same command.
    script = subprocess.run(
        [sys.executable, "worker.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_environment(),
        check=False,
    )
    assert script.returncode == 0 and script.stdout == done.out


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("STATECORE_METRICS_PORT", "abc", "STATECORE_METRICS_PORT: 'abc' is not a port number"),
        ("STATECORE_METRICS_PORT", "70000", "70000 is not a port number"),
        ("STATECORE_OTEL", "maybe", "STATECORE_OTEL: 'maybe' is not a boolean"),
        ("STATECORE_LOG_LEVEL", "loud", "STATECORE_LOG_LEVEL: 'loud' is not a log level"),
        ("STATECORE_LOG_FORMAT", "xml", "STATECORE_LOG_FORMAT: 'xml' is not a log format"),
        ("TEMPORAL_TLS", "maybe", "TEMPORAL_TLS: 'maybe' is not a boolean"),
        ("TEMPORAL_PROFILE", "nope", "Profile 'nope' not found"),
    ],
)
async def test_a_bad_variable_is_one_line_naming_it(variable: str, value: str, says: str) -> None:
    # A dead address: the value must be refused before anything connects.
    env = {"TEMPORAL_ADDRESS": "127.0.0.1:9", variable: value}
    for command in (["worker"], ["sessions", "list"]):
        if variable.startswith("STATECORE_") and command[0] != "worker":
            continue  # the worker's own settings
        done = await statecore(*command, env=env, within=60)
        assert_one_line_error(done, 2)
        assert says in done.err, done.err


def test_tls_is_a_switch_that_never_takes_the_command_as_its_value() -> None:
    from statecore.cli._app import build_parser

    args = build_parser().parse_args(["--tls", "sessions", "list"])
    assert args.tls is True and args.command == "sessions"
    assert build_parser().parse_args(["worker", "--no-tls"]).tls is False


async def test_bad_flags_are_usage_errors() -> None:
    for args in (["--metrics-port", "abc"], ["--port", "http"], ["--timeout", "-1"]):
        done = await statecore("worker", *args)
        assert_one_line_error(done, 2)
        assert args[0] in done.err


async def test_an_empty_database_url_is_the_default_for_the_command_too(tmp_path: Path) -> None:
    # Before one reader, the worker took STATECORE_DATABASE_URL= as unset and the command
    # tried to open "" as a URL.
    proc = await asyncio.create_subprocess_exec(
        STATECORE,
        "db",
        "upgrade",
        env={**cli_environment(), **EMPTY},
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert (tmp_path / ".statecore" / "statecore.db").exists()


@pytest.mark.temporal
async def test_worker_answers_a_turn_with_empty_variables_and_stops_on_sigterm(
    dev_server: DevServer, tmp_path: Path
) -> None:
    queue = f"wq-{uuid.uuid4().hex[:8]}"
    env = {
        **cli_environment(),
        **EMPTY,
        "TEMPORAL_ADDRESS": dev_server.address,
        "STATECORE_TASK_QUEUE": queue,
    }
    log = tmp_path / "worker.log"
    # Run from tmp_path: the empty STATECORE_DATABASE_URL means the default, .statecore/ here.
    proc = subprocess.Popen(
        [STATECORE, "worker"],
        cwd=tmp_path,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while "statecore worker on task queue" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log_tail(log)
            assert time.monotonic() < deadline, f"not polling within 90s:\n{log_tail(log)}"
            await asyncio.sleep(0.2)
        client = await Client.connect(dev_server.address, data_converter=pydantic_data_converter)
        sessions = AgentSessionClient(client, task_queue=queue)
        result = await sessions.send("worker-cmd", "s1", "hello worker", turn_id="t1")
        assert result.turn == 1 and "hello worker" in result.reply.content
        assert (tmp_path / ".statecore" / "statecore.db").exists()

        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
        assert code == 0, log_tail(log)
        assert time.monotonic() - started < 15, "SIGTERM took too long to stop the worker"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.temporal
async def test_worker_py_runs_the_same_command(dev_server: DevServer, tmp_path: Path) -> None:
    queue = f"wq-{uuid.uuid4().hex[:8]}"
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    env = {**cli_environment(), "TEMPORAL_ADDRESS": dev_server.address}
    log = tmp_path / "worker.log"
    async with worker_cli(["--task-queue", queue, "--database-url", url], env, log) as proc:
        client = await Client.connect(dev_server.address, data_converter=pydantic_data_converter)
        sessions = AgentSessionClient(client, task_queue=queue)
        result = await sessions.send("worker-py", "s1", "hi", turn_id="t1")
        assert result.turn == 1
    assert proc.returncode == 0, log_tail(log)
    assert f"connected to Temporal at {dev_server.address} (namespace default" in log.read_text()
