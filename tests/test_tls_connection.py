"""TLS end to end: ``statecore worker`` and the ``statecore`` command reach a Temporal dev
server through a TLS-terminating proxy that requires a client certificate (mTLS), configured
the way the ``temporal`` CLI is (``TEMPORAL_TLS_*`` variables, a ``temporal.toml`` profile),
and a turn goes through. Without the CA or the client certificate they fail, saying where.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from statecore.temporal._devserver import DevServer
from tests.cli.conftest import STATECORE, assert_one_line_error, cli_environment, statecore
from tests.dbs import fresh_database
from tests.temporal.conftest import dev_server  # noqa: F401  (fixture)
from tests.tls_proxy import SERVER_NAME, TlsProxy, haproxy_binary, tls_proxy
from tests.worker_cli import log_tail, worker_cli

pytestmark = [
    pytest.mark.temporal,
    pytest.mark.skipif(
        haproxy_binary() is None,
        reason="HAProxy is not installed (scripts/services.sh installs it with apt, as root)",
    ),
]


@pytest.fixture
async def proxy(dev_server: DevServer, tmp_path: Path) -> AsyncIterator[TlsProxy]:  # noqa: F811
    with tls_proxy(dev_server.address, tmp_path / "tls") as running:
        yield running


def tls_variables(proxy: TlsProxy) -> dict[str, str]:
    return {
        "TEMPORAL_ADDRESS": proxy.address,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(proxy.certs.ca),
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(proxy.certs.client_cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(proxy.certs.client_key),
        "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
    }


def write_profile(path: Path, proxy: TlsProxy) -> Path:
    path.write_text(
        "[profile.secure]\n"
        f'address = "{proxy.address}"\n'
        'namespace = "default"\n'
        "[profile.secure.tls]\n"
        f'server_name = "{SERVER_NAME}"\n'
        f'server_ca_cert_path = "{proxy.certs.ca}"\n'
        f'client_cert_path = "{proxy.certs.client_cert}"\n'
        f'client_key_path = "{proxy.certs.client_key}"\n'
    )
    return path


def proxied_connections(proxy: TlsProxy) -> int:
    """Connections HAProxy relayed to the dev server (logged as each one ends)."""
    log = proxy.certs.ca.parent / "haproxy.log"
    return log.read_text(errors="replace").count("temporal_tls~ temporal/dev")


async def test_worker_and_command_take_turns_through_mtls(proxy: TlsProxy, tmp_path: Path) -> None:
    queue = f"tls-{uuid.uuid4().hex[:8]}"
    async with fresh_database("sqlite", "tls") as url:
        env = {
            **cli_environment(),
            **tls_variables(proxy),
            "STATECORE_DATABASE_URL": url,
            "STATECORE_TASK_QUEUE": queue,
        }
        log = tmp_path / "worker.log"
        async with worker_cli([], env, log, command=("statecore", "worker")) as proc:
            assert f"connected to Temporal at {proxy.address} (namespace default, TLS)" in (
                log.read_text()
            )
            # The command through a temporal.toml profile; no TEMPORAL_* variable is set.
            profile = write_profile(tmp_path / "temporal.toml", proxy)
            done = await statecore(
                "--config-file", str(profile), "--profile", "secure",
                "--task-queue", queue, "--database-url", url,
                "--json", "chat", "tls-agent", "s1",
                stdin="hello over tls\n",
            )  # fmt: skip
            assert done.code == 0, done.err
            (turn,) = done.json_lines()
            assert turn["turn"] == 1 and "hello over tls" in turn["reply"]["content"]
        assert proc.returncode == 0, log_tail(log)
    # Both went through the proxy: the worker's connection and the command's (HAProxy logs
    # each as it closes, a moment after the process ends).
    for _ in range(50):
        if proxied_connections(proxy) >= 2:
            break
        await asyncio.sleep(0.1)
    assert proxied_connections(proxy) >= 2


async def test_without_the_ca_the_command_fails_naming_the_address(proxy: TlsProxy) -> None:
    done = await statecore(
        "--address", proxy.address, "--tls",
        "--tls-cert-path", str(proxy.certs.client_cert),
        "--tls-key-path", str(proxy.certs.client_key),
        "--tls-server-name", SERVER_NAME,
        "--timeout", "15", "sessions", "list",
    )  # fmt: skip
    assert_one_line_error(done, 5)
    assert f"cannot reach Temporal at {proxy.address} (namespace default, TLS)" in done.err
    assert "certificate" in done.err.lower() or "issuer" in done.err.lower(), done.err


async def test_without_a_client_certificate_the_proxy_refuses(proxy: TlsProxy) -> None:
    done = await statecore(
        "--address", proxy.address,
        "--tls-ca-path", str(proxy.certs.ca),
        "--tls-server-name", SERVER_NAME,
        "--timeout", "15", "sessions", "list",
    )  # fmt: skip
    assert_one_line_error(done, 5)
    assert f"cannot reach Temporal at {proxy.address}" in done.err


async def test_a_worker_without_the_ca_exits_saying_why(proxy: TlsProxy, tmp_path: Path) -> None:
    env = {**cli_environment(), **tls_variables(proxy)}
    del env["TEMPORAL_TLS_SERVER_CA_CERT_PATH"]
    env["STATECORE_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    worker = await asyncio.create_subprocess_exec(
        STATECORE,
        "worker",
        "--timeout",
        "15",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(worker.communicate(), timeout=60)
    assert worker.returncode == 5, err.decode()
    assert f"cannot reach Temporal at {proxy.address} (namespace default, TLS)" in err.decode()


async def test_a_profile_naming_a_missing_file_is_a_usage_error(
    proxy: TlsProxy, tmp_path: Path
) -> None:
    profile = write_profile(tmp_path / "temporal.toml", proxy)
    profile.write_text(profile.read_text().replace(str(proxy.certs.ca), "/no/such/ca.pem"))
    done = await statecore("--config-file", str(profile), "--profile", "secure", "sessions", "list")
    assert_one_line_error(done, 2)
    assert "/no/such/ca.pem" in done.err
