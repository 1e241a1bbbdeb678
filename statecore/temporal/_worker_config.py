"""``WorkerConfig``: what a statecore worker runs with.

Apart from ``worker`` so that the dev stack, the option readers and the worker all read it
without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from statecore.contract._session import DEFAULT_TASK_QUEUE
from statecore.temporal._connection import ConnectionConfig
from statecore.temporal._environment import DEFAULT_DATA_DIR, DEFAULT_DATABASE_URL


@dataclass
class WorkerConfig:
    """What a statecore worker runs with; ``run_worker`` takes it."""

    #: How to reach Temporal (address, namespace, TLS, API key, temporal.toml profile).
    connection: ConnectionConfig = field(default_factory=ConnectionConfig)
    task_queue: str = DEFAULT_TASK_QUEUE
    database_url: str = DEFAULT_DATABASE_URL
    model: str = "offline"
    model_base_url: str | None = None
    model_api_key: str | None = None
    encoding: str = "cl100k_base"
    migrate: bool = True
    #: Start an embedded dev server (with Web UI) and connect to it instead of ``connection``.
    dev: bool = False
    dev_port: int = 7233
    dev_ui_port: int = 8233
    data_dir: str = DEFAULT_DATA_DIR
    register_search_attributes: bool = True
    #: ``"id:key,id:key"`` (newest last): encrypt every payload with AES-256-GCM
    #: (statecore.temporal._encryption).
    encryption_keys: str | None = None
    #: Serve Prometheus metrics (Temporal's and statecore's) on ``metrics_host:metrics_port``.
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: OpenTelemetry tracing (the ``otel`` extra); spans to ``otel_endpoint`` (OTLP/gRPC) if
    #: set, else to the console.
    otel: bool = False
    otel_endpoint: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
