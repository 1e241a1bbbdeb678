"""StatecorePlugin adjusts what the application configured instead of replacing it.

A user's payload codec keeps encoding history, a user's sandbox keeps its pass-through
modules, and a user's interceptors keep being called, next to statecore's own.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message as ProtoMessage
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    OutboundInterceptor,
    StartWorkflowUpdateWithStartInput,
    WorkflowUpdateHandle,
)
from temporalio.client import (
    Interceptor as ClientInterceptor,
)
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    PayloadCodec,
)
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    UnsandboxedWorkflowRunner,
    Worker,
)
from temporalio.worker import (
    Interceptor as WorkerInterceptor,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from statecore import AgentSessionClient, StatecorePlugin
from statecore.agent_session._input_count_interceptor import SingleInputInterceptor
from statecore.contract._session import SendMessageInput
from statecore.temporal._converter import StatecorePayloadConverter, adjust_data_converter
from statecore.temporal._devserver import DevServer
from statecore.temporal._plugin import SANDBOX_PASSTHROUGH, workflow_runner

MARKER = b"binary/test-user-codec"


class UserCodec(PayloadCodec):
    """An application's own codec: base64 under its own encoding name."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": MARKER}, data=base64.b64encode(p.SerializeToString()))
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for p in payloads:
            assert p.metadata["encoding"] == MARKER, p.metadata
            inner = Payload()
            inner.ParseFromString(base64.b64decode(p.data))
            decoded.append(inner)
        return decoded


class OtherCodec(UserCodec):
    pass


class UserFailureConverter(DefaultFailureConverter):
    pass


#: Fields Temporal keeps readable by the server (indexed for visibility), never encoded by a
#: payload codec: statecore's search attributes live there, and nothing secret does.
UNENCODED_FIELDS = {"search_attributes"}
#: Marker details the SDK writes itself, never through a codec: bookkeeping, no user data.
SDK_MARKER_DETAILS = {"data", "patch-data"}


def _payloads(message: ProtoMessage) -> Iterator[Payload]:
    """Every Payload inside a protobuf message, except in fields codecs never encode."""
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.message_type is None or field.name in UNENCODED_FIELDS:
            continue  # a scalar, a list of them, or a server-readable field
        if isinstance(value, ProtoMessage):
            yield from _payloads(value)
            continue
        # A repeated field or a map of messages.
        if hasattr(value, "items"):
            # A local activity's marker keeps the SDK's own bookkeeping (sequence, attempt,
            # activity type) under "data", unencoded; its result is under "result". A patch
            # marker (workflow.patched) holds only the patch's name, written by the SDK's core.
            items = [
                v
                for k, v in value.items()
                if not (field.name == "details" and k in SDK_MARKER_DETAILS)
            ]
        else:
            items = list(value)
        for item in items:
            if isinstance(item, ProtoMessage):
                yield from _payloads(item)


def _plugin(tmp_path: Path) -> StatecorePlugin:
    return StatecorePlugin(f"sqlite+aiosqlite:///{tmp_path / 'statecore.db'}")


# --- the data converter --------------------------------------------------------------------------


async def test_a_users_codec_encodes_the_whole_history_of_a_statecore_session(
    dev_server: DevServer, tmp_path: Path
) -> None:
    client = await Client.connect(
        dev_server.address,
        data_converter=DataConverter(payload_codec=UserCodec()),
        plugins=[_plugin(tmp_path)],
    )
    assert client.data_converter.payload_converter_class is StatecorePayloadConverter
    assert isinstance(client.data_converter.payload_codec, UserCodec)
    task_queue = f"codec-{uuid.uuid4().hex[:8]}"
    sessions = AgentSessionClient(client, task_queue=task_queue)
    async with Worker(client, task_queue=task_queue):
        result = await sessions.send("codec-agent", "s1", "keep this private")
        handle = sessions.handle("codec-agent", "s1")
        history = await handle.fetch_history()
    assert result.turn == 1 and result.reply.content
    payloads = [p for event in history.events for p in _payloads(event)]
    assert len(payloads) > 5
    assert {p.metadata.get("encoding") for p in payloads} == {MARKER}
    assert not any(b"keep this private" in p.data for p in payloads)


def test_the_payload_converter_becomes_pydantic_and_everything_else_stays() -> None:
    user = DataConverter(payload_codec=UserCodec(), failure_converter_class=UserFailureConverter)
    adjusted = adjust_data_converter(user)
    assert adjusted.payload_converter_class is StatecorePayloadConverter
    assert adjusted.payload_codec is user.payload_codec
    assert adjusted.failure_converter_class is UserFailureConverter
    assert adjusted.external_storage is user.external_storage
    # A pydantic converter the user chose (or a subclass of it) is theirs to keep.
    mine = type("MyPydantic", (PydanticPayloadConverter,), {})
    kept = DataConverter(payload_converter_class=mine)
    assert adjust_data_converter(kept) is kept


def test_statecores_payload_converter_writes_pydantics_payloads_and_shares_its_json_one() -> None:
    values = [
        SendMessageInput(turn_id="t-1", content="caf\u00e9 \u4e2d", metadata={"n": 1}),
        {"plain": [1, 2.5, None]},
        b"\x00raw",
        None,
    ]
    ours, theirs = StatecorePayloadConverter(), PydanticPayloadConverter()
    payloads = ours.to_payloads(values)
    assert payloads == theirs.to_payloads(values)
    hints = [SendMessageInput, dict, bytes, type(None)]
    assert ours.from_payloads(payloads, hints) == theirs.from_payloads(payloads, hints)
    # Temporal builds one per workflow activation: they share one JSON converter.
    again = StatecorePayloadConverter()
    assert again.converters[b"json/plain"] is ours.converters[b"json/plain"]
    assert list(again.converters) == list(theirs.converters)


def test_the_plugins_codec_applies_when_the_user_has_none() -> None:
    codec = UserCodec()
    adjusted = adjust_data_converter(None, codec=codec)
    assert adjusted.payload_codec is codec
    # An error can quote what a turn contained: its message is encoded too.
    assert adjusted.failure_converter_class is DefaultFailureConverterWithEncodedAttributes
    own = DataConverter(failure_converter_class=UserFailureConverter)
    assert adjust_data_converter(own, codec=codec).failure_converter_class is UserFailureConverter


async def test_two_codecs_are_refused_before_anything_is_sent(
    dev_server: DevServer, tmp_path: Path
) -> None:
    plugin = StatecorePlugin(f"sqlite+aiosqlite:///{tmp_path / 'statecore.db'}", codec=OtherCodec())
    with pytest.raises(ValueError, match="pass it in one place"):
        await Client.connect(
            dev_server.address,
            data_converter=DataConverter(payload_codec=UserCodec()),
            plugins=[plugin],
        )


def test_a_custom_payload_converter_that_is_not_pydantic_is_refused() -> None:
    custom = type("MyConverter", (DefaultPayloadConverter,), {})
    with pytest.raises(ValueError, match="PydanticPayloadConverter"):
        adjust_data_converter(DataConverter(payload_converter_class=custom))


# --- the workflow runner -------------------------------------------------------------------------


def test_a_users_sandbox_keeps_its_pass_through_modules_and_gains_statecores() -> None:
    user = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("my_company_models")
    )
    adjusted = workflow_runner(user)
    assert isinstance(adjusted, SandboxedWorkflowRunner)
    passed = adjusted.restrictions.passthrough_modules
    assert "my_company_models" in passed
    assert set(SANDBOX_PASSTHROUGH) <= passed
    assert user.restrictions.passthrough_modules >= {"my_company_models"}
    assert not set(SANDBOX_PASSTHROUGH) <= user.restrictions.passthrough_modules  # a copy


def test_an_unsandboxed_runner_stays_unsandboxed() -> None:
    user = UnsandboxedWorkflowRunner()
    assert workflow_runner(user) is user


async def test_a_turn_runs_on_a_worker_with_a_users_own_sandbox(
    dev_server: DevServer, tmp_path: Path
) -> None:
    client = await Client.connect(dev_server.address, plugins=[_plugin(tmp_path)])
    task_queue = f"sandbox-{uuid.uuid4().hex[:8]}"
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("json")
    )
    async with Worker(client, task_queue=task_queue, workflow_runner=runner) as worker:
        used = worker.config(active_config=True).get("workflow_runner")
        result = await AgentSessionClient(client, task_queue=task_queue).send("sb", "s1", "hi")
    assert isinstance(used, SandboxedWorkflowRunner)
    assert {"json", *SANDBOX_PASSTHROUGH} <= used.restrictions.passthrough_modules
    assert result.turn == 1


# --- interceptors --------------------------------------------------------------------------------


class _RecordingClientInterceptor(ClientInterceptor):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        calls = self.calls

        class Outbound(OutboundInterceptor):
            async def start_update_with_start_workflow(
                self, input: StartWorkflowUpdateWithStartInput
            ) -> WorkflowUpdateHandle[Any]:
                calls.append(input.update_workflow_input.update)
                return await super().start_update_with_start_workflow(input)

        return Outbound(next)


class _RecordingWorkerInterceptor(WorkerInterceptor):
    def __init__(self) -> None:
        self.activities: list[str] = []

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        seen = self.activities

        class Inbound(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                seen.append(activity.info().activity_type)
                return await super().execute_activity(input)

        return Inbound(next)


async def test_a_users_interceptors_are_still_called_beside_statecores(
    dev_server: DevServer, tmp_path: Path
) -> None:
    client_side = _RecordingClientInterceptor()
    worker_side = _RecordingWorkerInterceptor()
    client = await Client.connect(
        dev_server.address, interceptors=[client_side], plugins=[_plugin(tmp_path)]
    )
    task_queue = f"icpt-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, interceptors=[worker_side]) as worker:
        result = await AgentSessionClient(client, task_queue=task_queue).send("ic", "s1", "hi")
        interceptors = list(worker.config(active_config=True).get("interceptors") or [])
    assert result.turn == 1
    assert client_side.calls == ["send_message"]
    assert "statecore.generate" in worker_side.activities
    assert worker_side in interceptors
    assert sum(isinstance(i, SingleInputInterceptor) for i in interceptors) == 1
    assert dataclasses.is_dataclass(client.data_converter)
