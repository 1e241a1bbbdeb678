"""Worker telemetry switched on by ``worker.py`` flags: Prometheus metrics and OpenTelemetry
tracing. Nothing here reads the environment; ``WorkerConfig`` says what to set up.

- ``--metrics-port``: a Temporal runtime whose Prometheus endpoint serves the SDK's own metrics
  (``temporal_*``) and statecore's (``statecore_*``, see ``statecore.metrics``) at
  ``http://HOST:PORT/metrics``.
- ``--otel``: temporalio's ``TracingInterceptor`` on the client and its workers, so a turn is
  one trace: the client's update, the workflow's handler, the activities. Spans go to an OTLP
  collector when an endpoint is given, otherwise to the console. Needs the ``otel`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from statecore.errors import StatecoreError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from temporalio.contrib.opentelemetry import TracingInterceptor

#: The ``service.name`` of the worker's spans.
SERVICE_NAME = "statecore-worker"


def metrics_runtime(host: str, port: int) -> Runtime:
    """A Temporal runtime serving Prometheus metrics on ``host:port`` (fails if taken)."""
    if not 0 < port < 65536:
        raise ValueError(f"metrics port must be 1-65535, not {port}")
    return Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"{host}:{port}"))
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
