"""Running a statecore worker from a settled configuration.

Configuration is read in exactly two places, ``worker.py`` and the ``statecore`` CLI; both
build a ``WorkerConfig`` and hand it here. Nothing in this module reads the environment.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.converter import PayloadCodec
from temporalio.worker import Worker

from statecore.contract.session import DEFAULT_TASK_QUEUE, SEARCH_ATTRIBUTES
from statecore.llm import ChatModel, model_from_config
from statecore.observability.logs import SessionLogContext
from statecore.observability.tracing import Tracing, start_tracing, worker_runtime
from statecore.temporal.devserver import DevServer, start_dev_server
from statecore.temporal.plugin import StatecorePlugin

log = logging.getLogger("statecore.worker")

DEFAULT_DATA_DIR = ".statecore"


@dataclass
class WorkerConfig:
    address: str = "localhost:7233"
    temporal_namespace: str = "default"
    task_queue: str = DEFAULT_TASK_QUEUE
    database_url: str = f"sqlite+aiosqlite:///{DEFAULT_DATA_DIR}/statecore.db"
    model: str = "offline"
    model_base_url: str | None = None
    model_api_key: str | None = None
    encoding: str = "cl100k_base"
    migrate: bool = True
    #: Start an embedded dev server (with Web UI) instead of connecting to ``address``.
    dev: bool = False
    dev_port: int = 7233
    dev_ui_port: int = 8233
    data_dir: str = DEFAULT_DATA_DIR
    register_search_attributes: bool = True
    #: ``"id:key,id:key"`` (newest last): encrypt every payload with AES-256-GCM
    #: (statecore.encryption.codec).
    encryption_keys: str | None = None
    #: Serve Prometheus metrics (Temporal's and statecore's) on ``metrics_host:metrics_port``.
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: OpenTelemetry tracing (the ``otel`` extra); spans to ``otel_endpoint`` (OTLP/gRPC) if
    #: set, else to the console.
    otel: bool = False
    otel_endpoint: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


def build_models(config: WorkerConfig) -> dict[str, ChatModel]:
    model = model_from_config(
        config.model, api_key=config.model_api_key, base_url=config.model_base_url
    )
    return {"default": model}


def build_codec(config: WorkerConfig) -> PayloadCodec | None:
    """The payload encryption codec ``encryption_keys`` asks for, or None."""
    if not config.encryption_keys:
        return None
    # Imported only here: cryptography comes with the optional `encryption` extra.
    from statecore.encryption.codec import EncryptionCodec, Keyring

    keyring = Keyring.parse(config.encryption_keys)
    log.info(
        "payloads encrypted with key %r (keys held: %s)",
        keyring.current.key_id,
        ", ".join(keyring.key_ids),
    )
    return EncryptionCodec(keyring)


async def ensure_search_attributes(client: Client, namespace: str) -> list[str]:
    """Register statecore's search attributes if the namespace lacks them; returns the added.

    Upserting an unregistered attribute fails the workflow task, so a worker checks first."""
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    known = set(existing.custom_attributes) | set(existing.system_attributes)
    missing = {n: k for n, k in SEARCH_ATTRIBUTES.items() if n not in known}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace,
                search_attributes={
                    n: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{k.upper()}")
                    for n, k in missing.items()
                },
            )
        )
    return sorted(missing)


async def run_worker(config: WorkerConfig, *, stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set or SIGINT/SIGTERM arrives."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    codec = build_codec(config)  # a malformed key fails before anything starts
    runtime = worker_runtime(metrics_host=config.metrics_host, metrics_port=config.metrics_port)
    if config.metrics_port:
        log.info(
            "Prometheus metrics on http://%s:%d/metrics", config.metrics_host, config.metrics_port
        )
    tracing: Tracing | None = None
    server: DevServer | None = None
    address = config.address
    _prepare_directories(config)
    if config.dev:
        server = await start_dev_server(
            port=config.dev_port,
            ui_port=config.dev_ui_port,
            db_filename=str(Path(config.data_dir) / "temporal.db"),
            log_path=str(Path(config.data_dir) / "temporal.log"),
        )
        address = server.address
        log.info("Temporal dev server on %s, Web UI on %s", address, server.ui_url)
    try:
        plugin = StatecorePlugin(
            config.database_url,
            models=build_models(config),
            encoding=config.encoding,
            migrate=config.migrate,
            codec=codec,
        )
        if config.otel:
            tracing = start_tracing(endpoint=config.otel_endpoint)
            log.info("tracing to %s", config.otel_endpoint or "the console")
        client = await Client.connect(
            address,
            namespace=config.temporal_namespace,
            plugins=[plugin],
            interceptors=[tracing.interceptor] if tracing else [],
            runtime=runtime,
        )
        if config.register_search_attributes:
            added = await ensure_search_attributes(client, config.temporal_namespace)
            if added:
                log.info("registered search attributes %s", ", ".join(added))
        worker = Worker(client, task_queue=config.task_queue, interceptors=[SessionLogContext()])
        log.info(
            "statecore worker on task queue %r, database %s, model %s",
            config.task_queue,
            _redact(config.database_url),
            config.model,
        )
        async with worker:
            await stop.wait()
    finally:
        if tracing is not None:
            tracing.shutdown()
        if server is not None:
            server.stop()


def _prepare_directories(config: WorkerConfig) -> None:
    """Create the folders a SQLite database and the dev server's files live in."""
    if config.database_url.startswith("sqlite") and ":///" in config.database_url:
        path = config.database_url.split(":///", 1)[1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    if config.dev:
        Path(config.data_dir).mkdir(parents=True, exist_ok=True)


def _redact(url: str) -> str:
    """A database URL without its password, for logs."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"
