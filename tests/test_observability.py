"""Worker observability: Prometheus metrics, OpenTelemetry traces, JSON logs, on real turns.

The metrics and log test runs ``python worker.py --metrics-port N --log-format json`` as its
own process against a Temporal dev server and reads what an operator would read: the
``/metrics`` endpoint and the worker's log lines. One tracing test runs a worker in-process
with the interceptor ``--otel`` installs, exporting to memory; another runs
``worker.py --otel --otel-endpoint`` against a local stand-in for an OTLP collector.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from statecore.core._errors import SessionPausedError
from statecore.observability._tracing import start_tracing
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import DevServer, free_port, start_dev_server
from statecore.temporal._plugin import StatecorePlugin
from tests.dbs import fresh_database
from tests.worker_cli import base_env, worker_cli

pytestmark = pytest.mark.temporal

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(body: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample in a Prometheus text exposition."""
    samples = []
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a Prometheus sample: {line!r}"
        labels = dict(_LABEL.findall(m.group("labels") or ""))
        samples.append((m.group("name"), labels, float(m.group("value"))))
    return samples


def total(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    return sum(
        value
        for n, have, value in samples
        if n == name and all(have.get(k) == v for k, v in labels.items())
    )


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


@pytest.fixture(scope="module")
async def dev_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    logs = tmp_path_factory.mktemp("temporal")
    server = await start_dev_server(log_path=str(logs / "dev-server.log"))
    try:
        yield server
    finally:
        server.stop()


async def test_metrics_and_json_logs_of_a_worker(dev_server: DevServer, tmp_path: Path) -> None:
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    agent = f"agent-{uuid.uuid4().hex[:6]}"
    port = free_port()
    log = tmp_path / "worker.log"
    args = ["--address", dev_server.address, "--task-queue", queue]
    args += ["--metrics-port", str(port), "--log-format", "json"]
    client = await Client.connect(dev_server.address, data_converter=pydantic_data_converter)
    sessions = AgentSessionClient(client, task_queue=queue)

    async with (
        fresh_database("sqlite", "observed") as url,
        worker_cli([*args, "--database-url", url], base_env(), log),
    ):
        results = [
            await sessions.send(agent, "s1", f"message number {i}", turn_id=f"t{i}")
            for i in (1, 2, 3)
        ]
        # A resent turn id returns the same result and is counted once.
        again = await sessions.send(agent, "s1", "message number 3", turn_id="t3")
        assert again == results[2]

        report = await sessions.compact(agent, "s1", strategy="recent", max_messages=2)
        assert report.compacted == ["conversation"]

        await sessions.pause(agent, "s1", reason="maintenance")
        with pytest.raises(SessionPausedError):
            await sessions.send(agent, "s1", "refused", turn_id="t4")
        await sessions.handle(agent, "s1").signal("compact", {"strategy": "bogus"})
        for _ in range(100):
            if (await sessions.describe(agent, "s1")).rejections:
                break
            await asyncio.sleep(0.1)

        samples = parse_prometheus(
            await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics")
        )

    assert total(samples, "statecore_turns", task_queue=queue) == 3
    prompt = sum(r.usage.prompt_tokens for r in results)
    completion = sum(r.usage.completion_tokens for r in results)
    assert prompt > 0 and completion > 0
    assert total(samples, "statecore_tokens", kind="prompt") == prompt
    assert total(samples, "statecore_tokens", kind="completion") == completion
    assert total(samples, "statecore_turn_duration_count") == 3
    assert total(samples, "statecore_turn_duration_sum") > 0
    assert total(samples, "statecore_compactions", strategy="recent") == 1
    assert total(samples, "statecore_rejections", operation="send_message") == 1
    assert total(samples, "statecore_rejections", code="SessionPaused") == 1
    assert total(samples, "statecore_rejections", operation="compact", code="InvalidInput") == 1
    # The SDK's own metrics share the endpoint and its labels.
    assert total(samples, "temporal_activity_execution_latency_count", task_queue=queue) >= 3

    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    committed = [entry for entry in lines if entry["logger"] == "statecore.turns"]
    assert [(e["session_id"], e["agent_id"], e["turn_id"]) for e in committed] == [
        ("s1", agent, "t1"),
        ("s1", agent, "t2"),
        ("s1", agent, "t3"),
    ]
    assert {e["activity_type"] for e in committed} == {"statecore.generate"}
    rejected = [entry for entry in lines if entry["message"].startswith("rejected compact")]
    assert rejected and rejected[0]["session_id"] == "s1" and rejected[0]["agent_id"] == agent
    assert rejected[0]["workflow_id"] == f"agent-session:{agent}:s1"
    assert "run_id" in rejected[0] and "'run_id'" not in rejected[0]["message"]
    # Lines about no session say so instead of leaving the fields out.
    started = [entry for entry in lines if "statecore worker on task queue" in entry["message"]]
    assert started and started[0]["session_id"] is None


async def test_a_turn_is_one_trace_from_client_to_activities(dev_server: DevServer) -> None:
    exporter = InMemorySpanExporter()
    tracing = start_tracing(exporter=exporter)
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    async with fresh_database("sqlite", "traced") as url:
        plugin = StatecorePlugin(url)
        client = await Client.connect(
            dev_server.address, plugins=[plugin], interceptors=[tracing.interceptor]
        )
        async with Worker(client, task_queue=queue):
            sessions = AgentSessionClient(client, task_queue=queue)
            await sessions.send("tracer", "s1", "hello", turn_id="t1")
    tracing.shutdown()

    spans = exporter.get_finished_spans()
    names = {span.name for span in spans}
    assert {
        "StartUpdateWithStartWorkflow:AgentSession",
        "ValidateUpdate:send_message",
        "HandleUpdate:send_message",
        "StartActivity:statecore.generate",
        "RunActivity:statecore.generate",
    } <= names
    assert len({span.context.trace_id for span in spans}) == 1, "one turn, one trace"
    run = next(s for s in spans if s.name == "RunActivity:statecore.generate")
    assert run.attributes and run.attributes["temporalWorkflowID"] == "agent-session:tracer:s1"


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """Stands in for an OpenTelemetry collector: keeps what it is sent over OTLP/gRPC."""

    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: object
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[tuple[str, str]]:
        """(service.name, span name) of every span received."""
        out = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                attrs = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    out += [(attrs.get("service.name", ""), span.name) for span in scope.spans]
        return out


async def test_worker_otel_flag_exports_spans_to_an_otlp_collector(
    dev_server: DevServer, tmp_path: Path
) -> None:
    collector = Collector()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    args = ["--address", dev_server.address, "--task-queue", queue]
    args += ["--otel", "--otel-endpoint", f"http://127.0.0.1:{port}"]
    client = await Client.connect(dev_server.address, data_converter=pydantic_data_converter)
    try:
        async with (
            fresh_database("sqlite", "otlp") as url,
            worker_cli([*args, "--database-url", url], base_env(), tmp_path / "w.log") as proc,
        ):
            sessions = AgentSessionClient(client, task_queue=queue)
            await sessions.send("otlp-agent", "s1", "hello", turn_id="t1")
        assert proc.returncode == 0  # stopping flushes the batched spans
    finally:
        await server.stop(grace=None)

    received = collector.spans()
    assert ("statecore-worker", "RunActivity:statecore.generate") in received
    assert ("statecore-worker", "HandleUpdate:send_message") in received
