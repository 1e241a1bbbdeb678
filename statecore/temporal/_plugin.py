"""StatecorePlugin: everything a worker (and client) needs, in one ``SimplePlugin``.

::

    client = await Client.connect("localhost:7233", plugins=[StatecorePlugin(
        database_url="postgresql+asyncpg://app@db/agents")])
    await Worker(client, task_queue="statecore").run()

It adjusts rather than replaces what the client and worker were configured with: the data
converter gains the pydantic payload format (the user's codec, failure converter and external
storage stay), a sandboxed workflow runner gains statecore's pass-through modules (the user's
stay), and the user's interceptors, workflows and activities are kept beside statecore's. It
registers the AgentSession workflow and statecore's activities, and opens the store when the
worker starts and closes it when the worker stops.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from temporalio.converter import DataConverter, PayloadCodec
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from statecore.activities._control import ControlActivities
from statecore.activities._resources import WorkerResources
from statecore.activities._shares import ShareActivities
from statecore.activities._turns import TurnActivities
from statecore.agent_session import WORKFLOWS
from statecore.agent_session._input_count_interceptor import SingleInputInterceptor
from statecore.core._limits import (
    DEFAULT_SESSION_TTL_SECONDS,
    DEFAULT_STREAM_FLUSH_SECONDS,
    MAX_STREAM_POLL_SECONDS,
    MIN_STREAM_POLL_SECONDS,
)
from statecore.core._tokens import DEFAULT_ENCODING, TokenCounter
from statecore.llm import ChatModel, OfflineModel
from statecore.store import check_database_url, open_store
from statecore.store._base import StateStore
from statecore.store.sql._blobs import BlobTable
from statecore.temporal._agent_registry import agent_runners
from statecore.temporal._blob_driver import StatecoreBlobDriver, with_blob_storage
from statecore.temporal._converter import adjust_data_converter
from statecore.temporal._exit_guard import release_native_clients_at_exit

PLUGIN_NAME = "statecore"

#: Modules workflow code imports that are pure and safe to share with the sandbox: loading them
#: once outside it keeps workflow start-up fast and their classes identical on both sides.
SANDBOX_PASSTHROUGH = (
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "statecore.core._models",
    "statecore.core._errors",
    "statecore.core._profile",
    "statecore.contract",
    # The session's update validator counts a message's tokens with the activities' own
    # tokenizer (one rule, one loaded encoding); tiktoken is a pure function of its input.
    "statecore.core._tokens",
    "statecore.core._message_fit",
)


def workflow_runner(existing: WorkflowRunner | None = None) -> WorkflowRunner:
    """The user's workflow runner with statecore's pass-through modules added.

    A sandboxed runner keeps its own restrictions and pass-through modules and gains
    statecore's; any other runner (unsandboxed, or the user's own) is left as it is. With no
    runner configured, a sandboxed one with statecore's pass-throughs."""
    if existing is None:
        return SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*SANDBOX_PASSTHROUGH)
        )
    if isinstance(existing, SandboxedWorkflowRunner):
        restrictions = existing.restrictions.with_passthrough_modules(*SANDBOX_PASSTHROUGH)
        return dataclasses.replace(existing, restrictions=restrictions)
    return existing


def _with_blobs(
    existing: DataConverter | None,
    *,
    adjust: Callable[[DataConverter | None], DataConverter],
    driver: StatecoreBlobDriver,
    threshold_bytes: int,
) -> DataConverter:
    return with_blob_storage(adjust(existing), driver, threshold_bytes=threshold_bytes)


class StatecorePlugin(SimplePlugin):
    """Durable agent state for a Temporal client and worker.

    Args:
        database_url: where statecore's state lives (``sqlite+aiosqlite:///path``,
            ``postgresql+asyncpg://...``, ``mysql+asyncmy://...``, or ``memory://``).
        store: an already open store to use instead of ``database_url`` (not closed by us).
        models: the models turns can use, by name; ``"default"`` answers when a session does
            not name one. Defaults to the deterministic offline model.
        encoding: the tiktoken encoding used to count tokens (available offline).
        migrate: apply database migrations when the worker starts.
        default_ttl_seconds: idle TTL of sessions created without one.
        extra_workflows: more workflow classes to register (e.g. ones built on the turn API).
        extra_activities: more activities to register (e.g. the tools of a tool-using agent).
        activity_factories: callables given this worker's ``WorkerResources`` (store, models,
            token counter) that return more activities, for activities that need the store
            the plugin opens (e.g. ``activities.tools.example_tools``).
        agents: framework agents that answer turns in place of a model, by name: an
            ``agents.Agent`` of the OpenAI Agents SDK (the ``openai-agents`` extra) or any
            ``statecore.operations._agent_turns.AgentTurnRunner``. A session whose ``model`` names
            one, or whose ``agent_id`` names one while its model is ``"default"``, runs each
            turn as that agent's run (see docs/openai_agents.md).
        stream_flush_seconds: the shortest pause between two writes of a streaming turn's
            row (docs/streaming.md): lower streams each delta sooner, at more writes a turn.
        blob_threshold_bytes: store payloads this large or larger in statecore's database and
            keep only a claim in history (Temporal's external storage with
            ``StatecoreBlobDriver``; see docs/large_values.md). ``None`` (the default) leaves
            payloads inline. Applies to every workflow and activity of this client and worker,
            after the codec; external storage the user configured is kept.
        codec: a ``PayloadCodec`` applied to every payload of this client and worker, e.g.
            ``statecore.EncryptionCodec`` to keep workflow history encrypted. A codec already
            on the client's data converter is kept as it is; passing one here as well is a
            ``ValueError`` when the client is configured.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        store: StateStore | None = None,
        models: Mapping[str, ChatModel] | None = None,
        encoding: str = DEFAULT_ENCODING,
        migrate: bool = True,
        default_ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS,
        extra_workflows: Sequence[type] = (),
        extra_activities: Sequence[Callable[..., Any]] = (),
        activity_factories: Sequence[
            Callable[[WorkerResources], Sequence[Callable[..., Any]]]
        ] = (),
        codec: PayloadCodec | None = None,
        agents: Mapping[str, Any] | None = None,
        stream_flush_seconds: float = DEFAULT_STREAM_FLUSH_SECONDS,
        blob_threshold_bytes: int | None = None,
    ) -> None:
        if (database_url is None) == (store is None):
            raise ValueError("pass exactly one of database_url= or store=")
        if database_url is not None and not isinstance(database_url, str):
            raise ValueError("database_url must be a string URL")
        if database_url is not None:
            # A missing driver fails here, at once, naming the extra to install.
            check_database_url(database_url)
        if models is not None and "default" not in models:
            raise ValueError("models must include a 'default' entry")
        if codec is not None and not isinstance(codec, PayloadCodec):
            raise ValueError("codec must be a temporalio.converter.PayloadCodec")
        counter = TokenCounter(encoding)  # fails now, not at the first turn, if unavailable
        release_native_clients_at_exit()  # see statecore.temporal._exit_guard
        if (
            isinstance(stream_flush_seconds, bool)
            or not isinstance(stream_flush_seconds, int | float)
            or not MIN_STREAM_POLL_SECONDS <= stream_flush_seconds <= MAX_STREAM_POLL_SECONDS
        ):
            raise ValueError(
                f"stream_flush_seconds is {stream_flush_seconds!r}; use "
                f"{MIN_STREAM_POLL_SECONDS} to {MAX_STREAM_POLL_SECONDS} seconds"
            )
        self.resources = WorkerResources(
            models=dict(models) if models else {"default": OfflineModel()},
            counter=counter,
            agents=agent_runners(agents or {}),
            stream_flush_seconds=float(stream_flush_seconds),
        )
        #: Set while a worker running with this plugin has its store open (it polls then).
        self.store_ready = asyncio.Event()
        self._database_url = database_url
        self._given_store = store
        self._migrate = migrate
        self._default_ttl = default_ttl_seconds
        turns = TurnActivities(self.resources)
        control = ControlActivities(self.resources)
        shares = ShareActivities(self.resources)
        activities: list[Callable[..., Any]] = [
            turns.generate,
            turns.commit_turn,
            turns.read_kv,
            turns.read_flow,
            turns.read_state,
            control.open_session,
            control.close_session,
            control.describe,
            control.reset,
            control.compact,
            control.add_hint,
            shares.new_share_token,
            shares.redeem_share,
            shares.read_shared_kv,
            *extra_activities,
            *(made for factory in activity_factories for made in factory(self.resources)),
        ]
        self.blob_driver = self._blob_driver(database_url, store, blob_threshold_bytes)
        # Turns read documents and KV values up to 16 MiB only when payloads that large leave
        # history as claims; otherwise the activities refuse what a workflow task cannot carry.
        self.resources.large_values = self.blob_driver is not None
        converter: Callable[[DataConverter | None], DataConverter] = functools.partial(
            adjust_data_converter, codec=codec
        )
        if self.blob_driver is not None:
            assert blob_threshold_bytes is not None
            converter = functools.partial(
                _with_blobs,
                adjust=converter,
                driver=self.blob_driver,
                threshold_bytes=blob_threshold_bytes,
            )
        super().__init__(
            PLUGIN_NAME,
            # Callables: temporalio hands them what the user configured, to adjust.
            data_converter=converter,
            activities=activities,
            workflows=[*WORKFLOWS, *extra_workflows],
            workflow_runner=workflow_runner,
            # AgentSession handlers take one input (agent_session/_input_count_interceptor.py).
            interceptors=[SingleInputInterceptor()],
            run_context=self._run_context,
        )

    @staticmethod
    def _blob_driver(
        database_url: str | None, store: StateStore | None, threshold: int | None
    ) -> StatecoreBlobDriver | None:
        if threshold is None:
            return None
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ValueError("blob_threshold_bytes must be a whole number of bytes, 0 or more")
        if database_url is not None:
            return StatecoreBlobDriver(database_url)
        engine = getattr(store, "engine", None)
        if engine is None:
            raise ValueError(
                "blob_threshold_bytes needs a SQL database every worker and client reaches; "
                "the given store has none (memory://)"
            )
        return StatecoreBlobDriver(table=BlobTable(engine, owns_engine=False))

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Run the worker inside ``_run_context``; a failure to open the store ends it.

        temporalio marks a worker shut down only once its own run has begun; when a plugin's
        context fails before that (an unreachable database), ``async with Worker(...)``
        would wait forever for that mark and ignore every signal. temporalio marks it itself
        when its own start-up check fails; this does the same for ours."""
        try:
            await super().run_worker(worker, next)
        except BaseException:
            if not getattr(worker, "_started", True):
                worker._shutdown_complete_event.set()
            raise

    @asynccontextmanager
    async def _run_context(self) -> AsyncIterator[None]:
        if self._given_store is not None:
            self.resources.attach(self._given_store)
            self.store_ready.set()
            try:
                yield
            finally:
                self.store_ready.clear()
                self.resources.attach(None)
            return
        assert self._database_url is not None
        store = await open_store(
            self._database_url,
            token_counter=self.resources.counter,
            default_ttl_seconds=self._default_ttl,
            migrate=self._migrate,
        )
        self.resources.attach(store)
        self.store_ready.set()
        try:
            yield
        finally:
            self.store_ready.clear()
            self.resources.attach(None)
            await store.close()
            if self.blob_driver is not None:
                await self.blob_driver.close()
