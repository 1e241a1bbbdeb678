"""Worker telemetry switched on by ``worker.py`` flags: Prometheus metrics and OpenTelemetry
tracing. Nothing here reads the environment; ``WorkerConfig`` says what to set up.

- the worker's Temporal runtime forwards the SDK core's own log lines (warnings and errors)
  to Python logging (``temporalio.core``), so they come out in the worker's log format;
- ``--metrics-port``: that runtime's Prometheus endpoint serves the SDK's metrics
  (``temporal_*``) and statecore's (``statecore_*``, see ``statecore.observability._metrics``) at
  ``http://HOST:PORT/metrics``;
- ``--otel``: temporalio's ``TracingInterceptor`` on the client and its workers, so a turn is
  one trace: the client's update, the workflow's handler, the activities. Spans go to an OTLP
  collector when an endpoint is given, otherwise to the console. Needs the ``otel`` extra.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

from statecore.core._errors import StatecoreError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from temporalio.contrib.opentelemetry import TracingInterceptor

#: The ``service.name`` of the worker's spans.
SERVICE_NAME = "statecore-worker"


def worker_runtime(*, metrics_host: str = "127.0.0.1", metrics_port: int | None = None) -> Runtime:
    """The worker's Temporal runtime: core logs forwarded to Python logging and, with a
    port, Prometheus metrics on ``metrics_host:metrics_port`` (fails if the port is taken)."""
    if metrics_port is not None and not 0 < metrics_port < 65536:
        raise ValueError(f"metrics port must be 1-65535, not {metrics_port}")
    return Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(
                # The SDK's default levels; only the destination changes.
                filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
            ),
            metrics=(
                PrometheusConfig(bind_address=f"{metrics_host}:{metrics_port}")
                if metrics_port
                else None
            ),
        )
    )


@dataclass
class Tracing:
    """The interceptor to give ``Client.connect`` and the provider to flush at shutdown."""

    interceptor: TracingInterceptor
    provider: TracerProvider

    def shutdown(self) -> None:
        """Export what is buffered and stop exporting."""
        self.provider.shutdown()


def start_tracing(*, endpoint: str | None = None, exporter: SpanExporter | None = None) -> Tracing:
    """Tracing to ``exporter``, else an OTLP/gRPC collector at ``endpoint``
    (``http://collector:4317``), else the console."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
        from temporalio.contrib.opentelemetry import TracingInterceptor
    except ImportError as err:  # an optional extra, imported only when tracing is asked for
        raise StatecoreError(
            "tracing needs OpenTelemetry: install statecore with the otel extra "
            "(pip install 'statecore[otel]')"
        ) from err

    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        # Batched: exporting must not add a network round trip to every activity.
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    else:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    # Workflow spans also when the caller did not trace (operators use the CLI and the UI).
    interceptor = TracingInterceptor(
        provider.get_tracer("statecore"), always_create_workflow_spans=True
    )
    return Tracing(interceptor=interceptor, provider=provider)
