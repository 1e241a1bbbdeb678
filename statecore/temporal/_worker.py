"""Running a statecore worker from a settled configuration.

Configuration is read in one place, ``statecore.temporal._settings``, for ``statecore worker``
(and ``worker.py``, which runs it); a program builds a ``WorkerConfig`` itself. Nothing in this
module reads the environment.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.converter import PayloadCodec
from temporalio.worker import Worker

from statecore.contract._session import SEARCH_ATTRIBUTES
from statecore.llm import ChatModel, model_from_config
from statecore.observability._logs import SessionLogContext
from statecore.observability._tracing import Tracing, start_tracing, worker_runtime
from statecore.store import redact_url
from statecore.temporal._connection import ConnectionConfig
from statecore.temporal._dev_stack import dev_server_for, next_steps, start_ui_codec_server
from statecore.temporal._devserver import DevServer
from statecore.temporal._plugin import StatecorePlugin
from statecore.temporal._server_watch import DevServerGoneError, watch_dev_server
from statecore.temporal._worker_config import WorkerConfig

log = logging.getLogger("statecore.worker")

#: The signals that stop a worker run by ``run_worker``.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
    from statecore.temporal._encryption import EncryptionCodec, Keyring

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


async def run_worker(
    config: WorkerConfig | None = None,
    *,
    client: Client | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run a statecore worker until ``stop`` is set or SIGINT/SIGTERM arrives.

    It connects as ``config.connection`` says (or to the dev server ``config.dev`` starts),
    unless given ``client``: a ``Client`` you connected yourself (your TLS, API key,
    interceptors, plugins). statecore's plugin then joins a copy of that client sharing its
    connection; the client you passed is left as it was. ``config`` defaults to
    ``WorkerConfig()``."""
    config = config or WorkerConfig()
    if client is not None and config.dev:
        raise ValueError("dev=True starts its own server; pass client= or dev=True, not both")
    if client is not None and config.metrics_port:
        raise ValueError(
            "metrics_port needs run_worker to connect (metrics come from the runtime it "
            "connects with); give your client a Runtime with telemetry, or pass no client"
        )
    codec = build_codec(config)  # a malformed key fails before anything starts
    if client is None:
        config.connection.resolve()  # a bad profile or TLS file fails before the dev server
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    polling = asyncio.Event()
    running = asyncio.ensure_future(_run(config, client, codec, stop, polling))
    signals = 0

    def on_signal() -> None:
        # The first signal drains a polling worker; before it polls there is nothing to
        # drain, so start-up is cut short at once. A second signal cuts shutdown short too.
        nonlocal signals
        signals += 1
        stop.set()
        if not polling.is_set() or signals > 1:
            log.info("stopping now (signal %d)", signals)
            running.cancel()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal)
    try:
        await running
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if signals == 0 or (task is not None and task.cancelling()):
            raise  # our caller cancelled us, not a signal
        log.info("statecore worker stopped by signal")
    finally:
        # The loop is the caller's: the handlers go once the worker has stopped.
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


async def _run(
    config: WorkerConfig,
    client: Client | None,
    codec: PayloadCodec | None,
    stop: asyncio.Event,
    polling: asyncio.Event,
) -> None:
    tracing: Tracing | None = None
    server: DevServer | None = None
    watch: asyncio.Task[str] | None = None
    codec_server: Any = None
    connection = config.connection
    _prepare_directories(config)
    try:
        # The plugin first: a database URL whose driver is missing fails before anything starts.
        plugin = StatecorePlugin(
            config.database_url,
            models=build_models(config),
            encoding=config.encoding,
            migrate=config.migrate,
            codec=codec,
        )
        if config.dev:
            if codec is not None and config.dev_ui_port:
                codec_server = start_ui_codec_server(codec, config.dev_ui_port)
            server = dev_server_for(config, codec_server.url if codec_server else None)
            # Assigned before it starts, so a signal during start-up still stops it.
            await server.start()
            # The dev server speaks plaintext on its own address; the namespace is still ours.
            connection = ConnectionConfig(
                address=server.address,
                namespace=connection.resolve()["namespace"],
                tls=False,
                environ={},
            )
            log.info("Temporal dev server on %s, Web UI on %s", server.address, server.ui_url)
        if config.otel:
            tracing = start_tracing(endpoint=config.otel_endpoint)
            log.info("tracing to %s", config.otel_endpoint or "the console")
        interceptors = [tracing.interceptor] if tracing else []
        if client is None:
            runtime = worker_runtime(
                metrics_host=config.metrics_host, metrics_port=config.metrics_port
            )
            if config.metrics_port:
                log.info(
                    "Prometheus metrics on http://%s:%d/metrics",
                    config.metrics_host,
                    config.metrics_port,
                )
            client = await connection.connect(
                plugins=[plugin], interceptors=interceptors, runtime=runtime
            )
            log.info("connected to Temporal at %s", connection.describe())
        else:
            client = with_plugin(client, plugin, interceptors)
        if config.register_search_attributes:
            added = await ensure_search_attributes(client, client.namespace)
            if added:
                log.info("registered search attributes %s", ", ".join(added))
        worker = Worker(client, task_queue=config.task_queue, interceptors=[SessionLogContext()])
        log.info(
            "statecore worker on task queue %r, database %s, model %s",
            config.task_queue,
            redact_url(config.database_url),
            config.model,
        )
        ready_note = next_steps(config, server, codec_server) if server is not None else None
        if server is not None:
            watch = asyncio.create_task(watch_dev_server(server, stop))
        await poll_until_stopped(worker, plugin_of(client, plugin), stop, polling, ready_note)
        if watch is not None and watch.done():
            raise DevServerGoneError(watch.result())
    finally:
        if watch is not None and not watch.done():
            watch.cancel()
        if tracing is not None:
            tracing.shutdown()
        if server is not None:
            server.stop()
        if codec_server is not None:
            codec_server.stop()


#: How long a stopping worker may take to finish its shutdown once cut short.
SHUTDOWN_LIMIT_SECONDS = 30.0


async def poll_until_stopped(
    worker: Worker,
    plugin: StatecorePlugin,
    stop: asyncio.Event,
    polling: asyncio.Event,
    ready_note: str | None,
) -> None:
    """Run ``worker`` until ``stop`` is set, then shut it down; raise what ends it early.

    ``polling`` is set once the store is open and the worker polls: before that a stop has
    nothing to drain, and cancelling this coroutine cuts start-up short at once (``async
    with Worker`` would first wait for the store to open or fail)."""
    run = asyncio.create_task(worker.run())
    try:
        ready = asyncio.create_task(plugin.store_ready.wait())
        await asyncio.wait({run, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if run.done():
            run.result()  # the store could not be opened: its error
            return
        polling.set()
        # What start-up built (modules, classes, the store's schema and caches) lives as long
        # as the process; frozen, it is left out of the cyclic collector's full passes, each
        # of which walked every object of it (~0.5 ms of CPU per turn, amortised).
        gc.collect()
        gc.freeze()
        if ready_note:
            log.info("%s", ready_note)
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not run.done():
            await worker.shutdown()
        # The plugin closes the store after the shutdown; a fatal worker error is raised here.
        await run
    finally:
        if not run.done():
            run.cancel()
            await asyncio.wait({run}, timeout=SHUTDOWN_LIMIT_SECONDS)
        if run.done() and not run.cancelled():
            run.exception()  # retrieved: the error that matters was raised above


def plugin_of(client: Client, fallback: StatecorePlugin) -> StatecorePlugin:
    """The StatecorePlugin the client's workers run with (a client given to ``run_worker``
    may carry its own)."""
    for plugin in client.config()["plugins"]:
        if isinstance(plugin, StatecorePlugin):
            return plugin
    return fallback


def with_plugin(client: Client, plugin: StatecorePlugin, interceptors: list[Any]) -> Client:
    """A client on ``client``'s connection, configured as it was plus statecore's plugin (and
    ``interceptors``). One already carrying a StatecorePlugin is used as it is."""
    settings = client.config()  # as the user gave it, before plugins applied themselves
    if any(isinstance(p, StatecorePlugin) for p in settings["plugins"]) and not interceptors:
        return client
    if not any(isinstance(p, StatecorePlugin) for p in settings["plugins"]):
        settings["plugins"] = [*settings["plugins"], plugin]
    settings["interceptors"] = [*settings["interceptors"], *interceptors]
    return Client(**settings)


def _prepare_directories(config: WorkerConfig) -> None:
    """Create the folders a SQLite database and the dev server's files live in."""
    if config.database_url.startswith("sqlite") and ":///" in config.database_url:
        path = config.database_url.split(":///", 1)[1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    if config.dev:
        Path(config.data_dir).mkdir(parents=True, exist_ok=True)
