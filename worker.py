"""Run a statecore worker.

    python worker.py --dev                  # embedded Temporal dev server + Web UI, SQLite
    python worker.py                        # connect to $TEMPORAL_ADDRESS (localhost:7233)
    python worker.py --database-url postgresql+asyncpg://app@db/agents --model openai:gpt-4o-mini \
        --model-base-url http://localhost:8000/v1

This is the only place (with the ``statecore`` CLI) that reads flags and the environment.
Environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, STATECORE_TASK_QUEUE,
STATECORE_DATABASE_URL, STATECORE_MODEL, STATECORE_MODEL_BASE_URL, STATECORE_MODEL_API_KEY
(or OPENAI_API_KEY), STATECORE_ENCODING, STATECORE_ENCRYPTION_KEYS, STATECORE_LOG_LEVEL,
STATECORE_LOG_FORMAT, STATECORE_METRICS_PORT, STATECORE_METRICS_HOST, STATECORE_OTEL,
OTEL_EXPORTER_OTLP_ENDPOINT.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from statecore.observability.logs import LOG_FORMATS, configure_logging
from statecore.temporal.worker import WorkerConfig, run_worker


def parse_config(argv: list[str] | None = None) -> WorkerConfig:
    # An empty variable counts as unset: compose's ${X:-} and .env files hand over "".
    env = {name: value for name, value in os.environ.items() if value}
    defaults = WorkerConfig()
    p = argparse.ArgumentParser(description="Run a statecore worker for AgentSession workflows.")
    p.add_argument("--dev", action="store_true", help="start an embedded Temporal dev server")
    p.add_argument("--address", default=env.get("TEMPORAL_ADDRESS", defaults.address))
    p.add_argument(
        "--namespace", default=env.get("TEMPORAL_NAMESPACE", "default"), help="Temporal namespace"
    )
    p.add_argument("--task-queue", default=env.get("STATECORE_TASK_QUEUE", defaults.task_queue))
    p.add_argument(
        "--database-url", default=env.get("STATECORE_DATABASE_URL", defaults.database_url)
    )
    p.add_argument(
        "--model",
        default=env.get("STATECORE_MODEL", defaults.model),
        help="'offline' or 'openai:<model name>'",
    )
    p.add_argument("--model-base-url", default=env.get("STATECORE_MODEL_BASE_URL"))
    p.add_argument("--encoding", default=env.get("STATECORE_ENCODING", defaults.encoding))
    p.add_argument(
        "--encryption-keys",
        default=env.get("STATECORE_ENCRYPTION_KEYS"),
        help="encrypt payloads (AES-256-GCM): comma-separated id:base64key, newest last;"
        " prefer the environment variable, flags show in the process list",
    )
    p.add_argument("--no-migrate", action="store_true", help="do not apply database migrations")
    p.add_argument("--port", type=int, default=defaults.dev_port, help="dev server gRPC port")
    p.add_argument(
        "--ui-port", type=int, default=defaults.dev_ui_port, help="dev server Web UI port"
    )
    p.add_argument("--data-dir", default=defaults.data_dir, help="where --dev keeps its files")
    p.add_argument("--log-level", default=env.get("STATECORE_LOG_LEVEL", "INFO"))
    p.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=env.get("STATECORE_LOG_FORMAT", "text"),
        help="json: one JSON object per line, with session_id, agent_id and turn_id",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=_int_or_none(env.get("STATECORE_METRICS_PORT")),
        help="serve Prometheus metrics (Temporal's and statecore's) on this port",
    )
    p.add_argument(
        "--metrics-host",
        default=env.get("STATECORE_METRICS_HOST", defaults.metrics_host),
        help="address the metrics endpoint binds (0.0.0.0 inside a container)",
    )
    p.add_argument(
        "--otel",
        "--tracing",
        action="store_true",
        default=env.get("STATECORE_OTEL", "").lower() in ("1", "true", "yes"),
        help="OpenTelemetry tracing (needs the otel extra)",
    )
    p.add_argument(
        "--otel-endpoint",
        default=env.get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        help="OTLP/gRPC collector, e.g. http://collector:4317 (default: spans to the console)",
    )
    args = p.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # migration chatter at start
    return WorkerConfig(
        address=args.address,
        temporal_namespace=args.namespace,
        task_queue=args.task_queue,
        database_url=args.database_url,
        model=args.model,
        model_base_url=args.model_base_url,
        model_api_key=env.get("STATECORE_MODEL_API_KEY") or env.get("OPENAI_API_KEY"),
        encoding=args.encoding,
        migrate=not args.no_migrate,
        encryption_keys=args.encryption_keys,
        dev=args.dev,
        dev_port=args.port,
        dev_ui_port=args.ui_port,
        data_dir=args.data_dir,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        otel=args.otel,
        otel_endpoint=args.otel_endpoint,
    )


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value else None


def main(argv: list[str] | None = None) -> None:
    asyncio.run(run_worker(parse_config(argv)))


if __name__ == "__main__":
    main()
