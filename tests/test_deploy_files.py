"""docker-compose.yml, the Dockerfile and their scripts, checked without Docker.

No Docker engine runs here, so the stack itself is never started. What can be checked is:
the files' structure (pinned images, health checks, start order, ports on 127.0.0.1, no
committed secrets), that they agree with the code (search attributes, the environment
the worker reads), and the parts that run without containers: the namespace job's script
against a real Temporal dev server, and the worker started exactly as the image starts it,
with the compose environment, against local PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tomllib
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

import statecore
from statecore.cli._app import build_parser
from statecore.contract._session import SEARCH_ATTRIBUTES
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import (
    DevServer,
    find_temporal_binary,
    free_port,
    start_dev_server,
)
from statecore.temporal._environment import STATECORE_VARIABLES, TEMPORAL_VARIABLES, Environment
from statecore.temporal._settings import log_settings, worker_config
from tests.dbs import fresh_database
from tests.worker_cli import REPO, base_env, log_tail, worker_cli

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
DOCKERFILE = (REPO / "Dockerfile").read_text()
SCRIPTS = REPO / "scripts" / "compose"

_VAR = re.compile(r"\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|\$\$")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's variable substitution: ``${X}``, ``${X:-default}``, ``${X-default}``, ``$$``."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group("name"), m.group("op"), m.group("arg") or ""
        if op == ":-":
            return env.get(name) or arg
        if op == "-":
            return env.get(name, arg)
        if op in (":?", "?") and not env.get(name):
            raise AssertionError(f"compose requires {name}: {arg}")
        return env.get(name, "")

    return _VAR.sub(one, value)


def service_env(name: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """A service's environment as compose would hand it over (defaults when ``env`` is empty)."""
    raw = SERVICES[name].get("environment", {})
    assert isinstance(raw, dict), f"{name}: use the mapping form of environment"
    return {k: interpolate(str(v), env or {}) for k, v in raw.items()}


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def dockerfile_cmd() -> list[str]:
    lines = [line for line in DOCKERFILE.splitlines() if line.startswith("CMD ")]
    assert len(lines) == 1, "the Dockerfile has exactly one CMD"
    return json.loads(lines[0][4:])  # exec form: a JSON array, so signals reach python


# --- structure ---------------------------------------------------------------------------------


def test_the_stack_has_every_service_the_design_names() -> None:
    assert set(SERVICES) == {
        "codec-server",
        "postgresql",
        "temporal-schema",
        "temporal",
        "temporal-namespace",
        "temporal-ui",
        "worker",
    }


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_image_is_pinned_to_a_version(name: str) -> None:
    image = SERVICES[name].get("image")
    assert image, f"{name} names its image (a built one gets a versioned tag)"
    repo, _, tag = image.rpartition(":")
    assert repo and "/" not in tag, f"{name}: image {image!r} has no tag"
    assert tag != "latest" and re.search(r"\d+\.\d+", tag), f"{name}: {image!r} is not pinned"


def test_the_built_worker_image_is_tagged_with_the_package_version() -> None:
    version = statecore.__version__  # the package's one version source
    assert SERVICES["worker"]["build"] == "."
    assert SERVICES["worker"]["image"] == f"statecore-worker:{version}"


@pytest.mark.parametrize("name", ["postgresql", "temporal", "worker", "codec-server"])
def test_long_running_services_have_health_checks(name: str) -> None:
    check = SERVICES[name].get("healthcheck")
    assert check and check.get("test"), f"{name} has no health check"
    assert check["test"][0] in ("CMD", "CMD-SHELL")


def test_start_order_waits_on_health_and_completed_jobs() -> None:
    conditions = {"service_healthy", "service_completed_successfully", "service_started"}
    for name, service in SERVICES.items():
        for dep, spec in service.get("depends_on", {}).items():
            assert isinstance(spec, dict) and spec.get("condition") in conditions, (name, dep)
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in SERVICES[dep], f"{name} waits on {dep}'s missing check"
            if spec["condition"] == "service_completed_successfully":
                assert SERVICES[dep].get("restart") == "no", f"{dep} is a one-shot job"

    def cond(service: str, dep: str) -> str:
        return SERVICES[service]["depends_on"][dep]["condition"]

    assert cond("temporal-schema", "postgresql") == "service_healthy"
    assert cond("temporal", "temporal-schema") == "service_completed_successfully"
    assert cond("temporal-namespace", "temporal") == "service_healthy"
    assert cond("temporal-ui", "temporal") == "service_healthy"
    assert cond("worker", "postgresql") == "service_healthy"
    assert cond("worker", "temporal-namespace") == "service_completed_successfully"


def test_every_published_port_is_bound_to_localhost() -> None:
    published = 0
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            published += 1
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", (name, port)
            else:
                assert str(port).startswith("127.0.0.1:"), f"{name}: {port!r} is open to all"
    assert published >= 4  # postgres, temporal, the UI, worker metrics


def test_no_secret_is_committed() -> None:
    secret = re.compile(r"PASSWORD|PWD|API_KEY|SECRET|ENCRYPTION_KEYS", re.IGNORECASE)
    for name, service in SERVICES.items():
        for key, value in service.get("environment", {}).items():
            if secret.search(key):
                assert str(value).startswith("${"), f"{name}.{key} must come from the environment"
    url = SERVICES["worker"]["environment"]["STATECORE_DATABASE_URL"]
    assert ":${POSTGRES_PASSWORD" in url, "the database password comes from the environment"
    creds = COMPOSE["x-postgres-credentials"]
    assert creds["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:-")


def test_mounted_files_exist_in_the_repository() -> None:
    mounts = 0
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = str(volume).split(":", 1)[0]
            if source.startswith("./"):
                mounts += 1
                assert (REPO / source).exists(), f"{name} mounts missing {source}"
    assert mounts >= 4


def test_the_schema_job_sets_up_the_databases_postgres_init_creates() -> None:
    init_sql = (SCRIPTS / "postgres-init.sql").read_text()
    created = set(re.findall(r"CREATE DATABASE (\w+);", init_sql))
    schema_script = (SCRIPTS / "temporal-schema.sh").read_text()
    assert created == {"temporal", "temporal_visibility"}
    loop = re.search(r"for db in ([^;]+);", schema_script)
    assert loop and dict(p.split(":") for p in loop.group(1).split()) == {
        "temporal": "temporal",
        "temporal_visibility": "visibility",
    }
    env = SERVICES["temporal"]["environment"]
    assert {env["DBNAME"], env["VISIBILITY_DBNAME"]} == created
    code = [line for line in schema_script.splitlines() if not line.lstrip().startswith("#")]
    # CREATE DATABASE cannot be repeated; the job can (compose reruns it on every `up`).
    assert not any(re.search(r"\bcreate\b", line) for line in code)


@pytest.mark.parametrize("script", ["temporal-schema.sh", "temporal-namespace.sh"])
def test_job_scripts_are_valid_posix_shell(script: str) -> None:
    done = subprocess.run(["sh", "-n", str(SCRIPTS / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_search_attributes_created_are_statecores() -> None:
    pairs = service_env("temporal-namespace")["STATECORE_SEARCH_ATTRIBUTES"].split()
    created = dict(pair.split("=", 1) for pair in pairs)
    assert created == SEARCH_ATTRIBUTES
    assert "search-attribute create" in (SCRIPTS / "temporal-namespace.sh").read_text()


def test_worker_environment_is_what_the_settings_reader_reads() -> None:
    given = set(SERVICES["worker"]["environment"])
    unknown = given - STATECORE_VARIABLES - TEMPORAL_VARIABLES
    assert not unknown, f"statecore worker never reads {sorted(unknown)}"
    assert {"TEMPORAL_ADDRESS", "STATECORE_DATABASE_URL", "STATECORE_METRICS_PORT"} <= given


def test_the_compose_environment_configures_the_worker_as_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the real reader: compose's defaults, its empty ${X:-} values counting as unset."""
    monkeypatch.setenv("XDG_CONFIG_HOME", base_env()["XDG_CONFIG_HOME"])  # a container's
    env = Environment.of(service_env("worker"))
    args = build_parser().parse_args(["worker"])
    config = worker_config(args, env, dev=False)
    assert config.connection.resolve() == {"target_host": "temporal:7233", "namespace": "default"}
    assert config.task_queue == "statecore" and config.model == "offline"
    assert config.model_base_url is None and config.model_api_key is None
    assert config.encryption_keys is None and config.otel is False
    assert (config.metrics_host, config.metrics_port) == ("0.0.0.0", 9464)
    assert log_settings(args, env).format == "json"
    url = service_env("worker")["STATECORE_DATABASE_URL"]
    assert url.startswith("postgresql+asyncpg://") and url.endswith("@postgresql:5432/statecore")
    assert SERVICES["postgresql"]["environment"]["POSTGRES_DB"] == "statecore"


def test_dockerfile_base_image_is_pinned_and_runs_statecore_worker() -> None:
    bases = re.findall(r"^FROM\s+(\S+)", DOCKERFILE, re.MULTILINE)
    assert bases and all(re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", b) for b in bases), bases
    assert dockerfile_cmd() == ["statecore", "worker"]
    for source in re.findall(r"^COPY\s+(.+?)\s+\S+$", DOCKERFILE, re.MULTILINE):
        for path in source.split():
            assert (REPO / path).exists(), f"the Dockerfile copies missing {path}"
    assert re.search(r"^USER\s+(?!root)\w+", DOCKERFILE, re.MULTILINE), "the worker is not root"


def test_docker_build_context_keeps_what_the_image_copies() -> None:
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"  # everything out, then only what the image copies back in
    for path in ("pyproject.toml", "requirements.lock", "README.md", "statecore/", "activities/"):
        assert f"!{path}" in lines


# --- locked dependencies and the codec server ---------------------------------------------------

LOCK = (REPO / "requirements.lock").read_text()
#: The extras the image installs: PostgreSQL, tracing, and encryption because compose passes
#: STATECORE_ENCRYPTION_KEYS to the worker (without cryptography it dies at start), and the
#: OpenAI-compatible model client (the openai SDK).
IMAGE_EXTRAS = ("postgres", "otel", "encryption", "openai")


def locked_versions() -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", LOCK, re.MULTILINE)
    return {canonicalize_name(name): version for name, version in pins}


def test_the_image_installs_only_the_locked_dependencies() -> None:
    steps = re.findall(r"^RUN\s+(.+)$", DOCKERFILE, re.MULTILINE)
    assert steps[0] == "pip install --require-hashes --no-deps -r requirements.lock"
    assert steps[1] == "pip install --no-deps --no-build-isolation . && pip check"
    assert DOCKERFILE.index("COPY requirements.lock") < DOCKERFILE.index("COPY statecore")
    # Every pin carries hashes (pip refuses the file otherwise with --require-hashes).
    assert len(locked_versions()) == LOCK.count("==") and "--hash=sha256:" in LOCK


def test_the_lock_satisfies_pyproject_with_every_extra_the_image_needs() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = list(project["project"]["dependencies"])
    for extra in IMAGE_EXTRAS:
        wanted += project["project"]["optional-dependencies"][extra]
    wanted += project["build-system"]["requires"]  # built with --no-build-isolation
    locked = locked_versions()
    for spec in wanted:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{spec} is not in requirements.lock (run scripts/lock.sh)"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"requirements.lock pins {name}=={locked[name]}, pyproject wants {spec}: "
            "run scripts/lock.sh"
        )
    assert "cryptography" in locked  # the encryption extra


def test_the_ui_decrypts_through_the_stacks_codec_server() -> None:
    codec = SERVICES["codec-server"]
    assert codec["image"] == SERVICES["worker"]["image"]  # the same locked image
    assert codec["profiles"] == ["encryption"]
    assert codec["ports"] == ["127.0.0.1:8081:8081"]
    on = {"TEMPORAL_CODEC_ENDPOINT": "http://127.0.0.1:8081", "STATECORE_ENCRYPTION_KEYS": "k"}
    # The browser calls it: the UI gets its address on the host, and it admits the UI's origin.
    assert service_env("temporal-ui", on)["TEMPORAL_CODEC_ENDPOINT"] == "http://127.0.0.1:8081"
    assert service_env("temporal-ui")["TEMPORAL_CODEC_ENDPOINT"] == ""  # off by default
    ui_port = SERVICES["temporal-ui"]["ports"][0].split(":")[1]
    command = codec["command"]
    origins = [command[i + 1] for i, arg in enumerate(command) if arg == "--allowed-origin"]
    assert f"http://127.0.0.1:{ui_port}" in origins and f"http://localhost:{ui_port}" in origins
    assert service_env("codec-server", on)["STATECORE_ENCRYPTION_KEYS"] == "k"


async def test_the_codec_server_runs_as_the_compose_file_runs_it(tmp_path: Path) -> None:
    """Its command and environment from docker-compose.yml, the port moved to a free one:
    the UI's origin gets a payload encrypted with the workers' keys back decrypted."""
    from statecore.temporal._encryption import EncryptionCodec, Keyring

    keys = f"2025-01:{statecore.generate_key()}"
    port = free_port()
    command = [str(port) if arg == "8081" else arg for arg in SERVICES["codec-server"]["command"]]
    command = [sys.executable if command[0] == "python" else command[0], *command[1:]]
    env = {**base_env(), **service_env("codec-server", {"STATECORE_ENCRYPTION_KEYS": keys})}
    log = (tmp_path / "codec.log").open("wb")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        plain = pydantic_data_converter.payload_converter.to_payloads(["a secret"])
        encrypted = await EncryptionCodec(Keyring.parse(keys)).encode(plain)
        body = json.dumps(json_format.MessageToDict(Payloads(payloads=encrypted))).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/decode",
            data=body,
            headers={"Content-Type": "application/json", "Origin": "http://127.0.0.1:8080"},
        )
        answer = None
        for _ in range(100):
            try:
                answer = await asyncio.to_thread(_open, request)
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "codec.log").read_text()
                await asyncio.sleep(0.1)
        assert answer is not None, (tmp_path / "codec.log").read_text()
        status, headers, data = answer
        assert status == 200
        assert headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:8080"
        decoded = json_format.Parse(data, Payloads())
        assert pydantic_data_converter.payload_converter.from_payloads(list(decoded.payloads)) == [
            "a secret"
        ]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _open(request: urllib.request.Request) -> tuple[int, Any, bytes]:
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers, response.read()


# --- what runs without Docker ------------------------------------------------------------------


@pytest.fixture(scope="module")
async def dev_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    logs = tmp_path_factory.mktemp("temporal")
    server = await start_dev_server(log_path=str(logs / "dev-server.log"))
    try:
        yield server
    finally:
        server.stop()


def run_namespace_job(dev_server: DevServer, namespace: str) -> subprocess.CompletedProcess[str]:
    """The temporal-namespace service's script with its compose environment, pointed here."""
    env = {
        **base_env(),
        **service_env("temporal-namespace"),
        "TEMPORAL_ADDRESS": dev_server.address,
        "TEMPORAL_NAMESPACE": namespace,
    }
    env["PATH"] = f"{Path(find_temporal_binary()).parent}{os.pathsep}{env['PATH']}"
    return subprocess.run(
        ["sh", str(SCRIPTS / "temporal-namespace.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
async def job_namespace(dev_server: DevServer) -> str:
    """A namespace made by the compose job alone (the dev server knows nothing of it)."""
    namespace = f"compose-{uuid.uuid4().hex[:8]}"
    done = await asyncio.to_thread(run_namespace_job, dev_server, namespace)
    assert done.returncode == 0, done.stdout + done.stderr
    return namespace


async def test_namespace_job_creates_namespace_and_search_attributes(
    dev_server: DevServer, job_namespace: str
) -> None:
    client = await Client.connect(dev_server.address, namespace=job_namespace)
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=job_namespace)
    )
    for name, kind in SEARCH_ATTRIBUTES.items():
        assert listed.custom_attributes.get(name) == IndexedValueType.Value(
            f"INDEXED_VALUE_TYPE_{kind.upper()}"
        ), name

    again = await asyncio.to_thread(run_namespace_job, dev_server, job_namespace)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"namespace {job_namespace} exists" in again.stdout
    assert again.stdout.count("exists") == 1 + len(SEARCH_ATTRIBUTES)
    assert "created" not in again.stdout


async def test_worker_runs_as_the_compose_file_runs_it(
    dev_server: DevServer, job_namespace: str, tmp_path: Path
) -> None:
    async with fresh_database("postgresql", "compose") as url:
        metrics_port = free_port()
        env = {
            **base_env(),
            **service_env("worker"),
            # The adaptations: the test's Temporal and PostgreSQL instead of the services, and
            # the metrics endpoint on a free local port instead of 0.0.0.0:9464.
            "TEMPORAL_ADDRESS": dev_server.address,
            "TEMPORAL_NAMESPACE": job_namespace,
            "STATECORE_DATABASE_URL": url,
            "STATECORE_METRICS_HOST": "127.0.0.1",
            "STATECORE_METRICS_PORT": str(metrics_port),
        }
        log = tmp_path / "worker.log"
        async with worker_cli([], env, log, command=dockerfile_cmd()) as proc:
            client = await Client.connect(
                dev_server.address, namespace=job_namespace, data_converter=pydantic_data_converter
            )
            sessions = AgentSessionClient(client, task_queue=env["STATECORE_TASK_QUEUE"])
            result = await sessions.send("compose-agent", "s1", "hello from compose", turn_id="t1")
            assert result.turn == 1 and result.reply.content

            health = SERVICES["worker"]["healthcheck"]["test"][1:]
            probe = [sys.executable if p == "python" else p for p in health]
            probe[-1] = probe[-1].replace(":9464/", f":{metrics_port}/")
            done = await asyncio.to_thread(subprocess.run, probe, capture_output=True, timeout=30)
            assert done.returncode == 0, done.stderr
            body = await asyncio.to_thread(_get, f"http://127.0.0.1:{metrics_port}/metrics")
            assert b"statecore_turns" in body
        assert proc.returncode == 0, log_tail(log)  # SIGTERM is a clean stop

        engine = create_async_engine(url, poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                found = await conn.execute(text("SELECT turn_id, role FROM statecore_messages"))
                rows = found.all()
        finally:
            await engine.dispose()
        assert sorted(rows) == [("t1", "assistant"), ("t1", "user")]

    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert lines, "STATECORE_LOG_FORMAT=json gives JSON lines"
    committed = [entry for entry in lines if entry["message"].startswith("turn 1 committed")]
    assert committed and committed[0]["session_id"] == "s1" and committed[0]["turn_id"] == "t1"
    # The job registered the search attributes; the worker found nothing to add.
    assert not any("registered search attributes" in entry["message"] for entry in lines)
