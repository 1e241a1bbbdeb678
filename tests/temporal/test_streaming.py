"""Streamed turns against a real dev server: deltas before the commit, exactly once, no history
cost, reconnection from a position, unknown turn ids, and a worker killed mid-stream."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from statecore.contract._streams import FinalEvent, RestartedEvent, TextEvent, ToolCallEvent
from statecore.core._errors import TurnNotFoundError
from statecore.llm import OfflineModel
from statecore.store import StateStore, open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.temporal.conftest import Env
from tests.temporal.worker_kill import (
    assert_exactly_once,
    kill_all,
    sql_messages,
    start_worker_process,
    wait_for_file,
)

DIALECTS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
    # MariaDB readers poll, as SQLite's do, on a server database.
    pytest.param("mysql", id="mariadb", marks=pytest.mark.mariadb),
]
#: A message long enough that its echo streams as dozens of words.
LONG = " ".join(f"word{i}" for i in range(40))


def replayed_text(events: list[Any]) -> str:
    """What a reader shows: the text deltas after the last restart, joined."""
    text = ""
    for event in events:
        if isinstance(event, RestartedEvent):
            text = ""
        elif isinstance(event, TextEvent):
            text += event.text
    return text


@pytest.fixture
async def streaming_env(
    request: pytest.FixtureRequest, env_factory: Callable[..., Any]
) -> AsyncIterator[tuple[Env, StateStore]]:
    dialect = request.param
    async with fresh_database(dialect, "stream") as url:
        model = OfflineModel(token_delay=0.01)
        async with env_factory(url, models={"default": model}) as env:
            store = await open_store(url)
            try:
                yield env, store
            finally:
                await store.close()


@pytest.mark.parametrize("streaming_env", DIALECTS, indirect=True)
async def test_tokens_arrive_before_the_commit_and_match_it(
    streaming_env: tuple[Env, StateStore],
) -> None:
    env, store = streaming_env
    sessions = env.new_client(store=store)
    events = [e async for e in sessions.stream(env.agent, "s", LONG, turn_id="t1")]
    final = events[-1]
    assert isinstance(final, FinalEvent)
    texts = [e for e in events if isinstance(e, TextEvent)]
    # Streamed in pieces, before the final event (the reply is ~50 words, 10 ms apart).
    assert len(texts) >= 3, events
    assert not any(isinstance(e, RestartedEvent) for e in events)
    assert replayed_text(events) == final.result.reply.content
    assert final.result.turn == 1 and final.result.turn_id == "t1"
    # Offsets are contiguous.
    assert [e.offset for e in texts] == [
        sum(len(t.text) for t in texts[:i]) for i in range(len(texts))
    ]
    # Committed once, and the stream row is gone.
    assert_exactly_once(await sql_messages(env.database_url, env.agent, "s"), ["t1"])
    assert await store.turn_streams.count(sessions.ref(env.agent, "s")) == 0
    # The same turn id again runs nothing: the stored reply, whole, and the same turn.
    again = [e async for e in sessions.stream(env.agent, "s", LONG, turn_id="t1")]
    assert isinstance(again[-1], FinalEvent) and again[-1].result.turn == 1
    assert replayed_text(again) == final.result.reply.content
    assert_exactly_once(await sql_messages(env.database_url, env.agent, "s"), ["t1"])


@pytest.mark.parametrize("streaming_env", DIALECTS, indirect=True)
async def test_a_streamed_turn_costs_no_more_history_than_a_sent_one(
    streaming_env: tuple[Env, StateStore],
) -> None:
    env, store = streaming_env
    sessions = env.new_client(store=store)
    async for _ in sessions.stream(env.agent, "sA", LONG, turn_id="turn-1"):
        pass
    await sessions.send(env.agent, "sB", LONG, turn_id="turn-1")
    sizes = []
    for session in ("sA", "sB"):
        history = await sessions.handle(env.agent, session).fetch_history()
        events = history.events
        payload_bytes = sum(
            p.ByteSize()
            for e in events
            for attr in (
                "activity_task_scheduled_event_attributes",
                "activity_task_completed_event_attributes",
            )
            if e.HasField(attr)
            for p in (
                getattr(e, attr).input.payloads
                if attr.endswith("scheduled_event_attributes")
                else getattr(e, attr).result.payloads
            )
        )
        sizes.append((len(events), [e.event_type for e in events], payload_bytes))
    (streamed_events, streamed_types, streamed), (sent_events, sent_types, sent) = sizes
    assert (streamed_events, streamed_types) == (sent_events, sent_types)
    # The model call's input carries the turn's stream flag, and nothing else more.
    assert streamed - sent == len(',"stream":true'), (streamed, sent)


async def test_a_turn_sent_without_stream_writes_no_stream_row(env: Env) -> None:
    """Streaming is asked for per turn: a plain send publishes nothing, so a chat turn that
    nobody streams costs no statement more than before."""
    store = await open_store(env.database_url)
    try:
        sessions = env.new_client(store=store)
        written: list[str] = []
        streams = type(store.turn_streams)
        original = streams.write

        async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            written.append("write")
            return await original(self, *args, **kwargs)

        streams.write = counted  # type: ignore[method-assign]
        try:
            await sessions.send(env.agent, "plain", LONG, turn_id="plain-1")
        finally:
            streams.write = original  # type: ignore[method-assign]
        assert written == []
        assert await store.turn_streams.read(sessions.ref(env.agent, "plain"), "plain-1") is None
    finally:
        await store.close()


@pytest.mark.parametrize("streaming_env", DIALECTS, indirect=True)
async def test_a_reader_that_leaves_and_comes_back_resumes_where_it_was(
    streaming_env: tuple[Env, StateStore],
) -> None:
    env, store = streaming_env
    sessions = env.new_client(store=store)
    first: list[Any] = []
    async for event in sessions.stream(env.agent, "r", LONG, turn_id="t1"):
        first.append(event)
        if sum(isinstance(e, TextEvent) for e in first) == 2:
            break  # the reader goes away; the turn goes on
    position = first[-1].position
    rest = [e async for e in sessions.stream(env.agent, "r", turn_id="t1", position=str(position))]
    final = rest[-1]
    assert isinstance(final, FinalEvent)
    assert not any(isinstance(e, RestartedEvent) for e in rest)
    assert replayed_text(first + rest) == final.result.reply.content
    assert_exactly_once(await sql_messages(env.database_url, env.agent, "r"), ["t1"])
    # Following a committed turn from the start gives the whole reply.
    whole = [e async for e in sessions.stream(env.agent, "r", turn_id="t1")]
    assert replayed_text(whole) == final.result.reply.content
    # A position from a text that is not the reply's start (as if a retry had replaced the
    # attempt while the reader was away): a restart, then the whole reply.
    bogus = position.model_copy(update={"crc": position.crc ^ 1})
    again = [e async for e in sessions.stream(env.agent, "r", turn_id="t1", position=bogus)]
    assert isinstance(again[0], RestartedEvent)
    assert replayed_text(again) == final.result.reply.content


@pytest.mark.parametrize("streaming_env", DIALECTS, indirect=True)
async def test_tool_calls_stream_as_events(streaming_env: tuple[Env, StateStore]) -> None:
    env, store = streaming_env
    sessions = env.new_client(store=store)
    events = [
        e
        async for e in sessions.stream(
            env.agent, "tools", 'use tool lookup {"q": "x"}', turn_id="t1"
        )
    ]
    final = events[-1]
    assert isinstance(final, FinalEvent)
    # No tool is offered to an AgentSession turn, so the offline model says so in text.
    assert replayed_text(events) == final.result.reply.content
    assert not [e for e in events if isinstance(e, ToolCallEvent)]


@pytest.mark.parametrize("streaming_env", DIALECTS, indirect=True)
async def test_an_unknown_turn_or_another_sessions_turn_is_refused(
    streaming_env: tuple[Env, StateStore],
) -> None:
    env, store = streaming_env
    sessions = env.new_client(store=store)
    await sessions.send(env.agent, "mine", "hello", turn_id="t-mine")
    with pytest.raises(TurnNotFoundError) as caught:
        async for _ in sessions.stream(env.agent, "mine", turn_id="no-such-turn"):
            pass
    assert caught.value.code == "TurnNotFound"
    await sessions.send(env.agent, "other", "hello", turn_id="t-other")
    with pytest.raises(TurnNotFoundError):
        async for _ in sessions.stream(env.agent, "mine", turn_id="t-other"):
            pass
    # A session that never existed.
    with pytest.raises(TurnNotFoundError):
        async for _ in sessions.stream(env.agent, "never", turn_id="t-mine"):
            pass


async def test_a_worker_killed_mid_stream_shows_the_restart_then_the_whole_reply(
    env: Env, dev_server: DevServer, tmp_path: Path
) -> None:
    queue = env.task_queue + "-stream"
    store = await open_store(env.database_url)
    sessions = env.new_client(store=store)
    sessions.task_queue = queue
    worker = start_worker_process(
        "tests.temporal.stream_worker_process",
        dev_server.address,
        queue,
        env.database_url,
        tmp_path,
        0.05,
    )
    replacement = None
    try:
        await wait_for_file(tmp_path / "worker-ready")
        events: list[Any] = []
        killed = False
        async for event in sessions.stream(
            env.agent, "kill", LONG, turn_id="k1", model_heartbeat_seconds=2
        ):
            events.append(event)
            if not killed and sum(isinstance(e, TextEvent) for e in events) >= 3:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)
                killed = True
                replacement = start_worker_process(
                    "tests.temporal.stream_worker_process",
                    dev_server.address,
                    queue,
                    env.database_url,
                    tmp_path,
                    0.01,
                )
        final = events[-1]
        assert isinstance(final, FinalEvent)
        restarts = [i for i, e in enumerate(events) if isinstance(e, RestartedEvent)]
        assert len(restarts) == 1, events
        assert restarts[0] > 0 and restarts[0] < len(events) - 1
        restart = events[restarts[0]]
        assert isinstance(restart, RestartedEvent) and restart.attempt == 2
        # The retry's reply from its start, whole, equal to what was committed.
        assert replayed_text(events) == final.result.reply.content
        after = [e for e in events[restarts[0] + 1 :] if isinstance(e, TextEvent)]
        assert after and after[0].offset == 0 and after[0].attempt == 2
        assert_exactly_once(await sql_messages(env.database_url, env.agent, "kill"), ["k1"])
        assert await store.turn_streams.count(sessions.ref(env.agent, "kill")) == 0
    finally:
        kill_all(worker, replacement)
        await store.close()


async def test_a_slow_reader_does_not_slow_the_turn(env: Env) -> None:
    """The reader sits on its first event for longer than the whole turn takes: the turn
    commits meanwhile, and the reader then catches up from what is stored."""
    store = await open_store(env.database_url)
    try:
        sessions = env.new_client(store=store)
        events: list[Any] = []
        async for event in sessions.stream(env.agent, "slow", LONG, turn_id="t1"):
            if not events:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 20
                while (await sessions.describe(env.agent, "slow")).checkpoint.turn != 1:
                    assert loop.time() < deadline, "the turn did not commit without its reader"
                    await asyncio.sleep(0.05)
            events.append(event)
        final = events[-1]
        assert isinstance(final, FinalEvent)
        assert replayed_text(events) == final.result.reply.content
    finally:
        await store.close()


async def test_an_openai_compatible_model_streams_through_the_turn(
    env_factory: Callable[..., Any],
) -> None:
    from statecore.llm import OpenAICompatibleModel
    from tests.llm.model_server import ModelServer, streamed

    server = ModelServer().start()
    pieces = [f"piece{i} " for i in range(12)]
    server.play(streamed(pieces, usage={"prompt_tokens": 5, "completion_tokens": 12},
                         chunk_delay=0.03))  # fmt: skip
    model = OpenAICompatibleModel(server.base_url, model="served", streams=True)
    try:
        async with (
            fresh_database("sqlite", "oai-stream") as url,
            env_factory(url, models={"default": model}) as env,
        ):
            store = await open_store(url)
            try:
                sessions = env.new_client(store=store)
                events = [e async for e in sessions.stream(env.agent, "oai", "hi")]
            finally:
                await store.close()
    finally:
        await model.aclose()
        server.stop()
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert final.result.reply.content == "".join(pieces)
    assert replayed_text(events) == final.result.reply.content
    assert sum(isinstance(e, TextEvent) for e in events) >= 3


@pytest.mark.parametrize("streaming_env", DIALECTS[:1], indirect=True)
async def test_pause_describe_compact_and_migrate_treat_a_streamed_turn_as_any_other(
    streaming_env: tuple[Env, StateStore], env_factory: Callable[..., Any]
) -> None:
    from statecore.core._errors import SessionPausedError

    env, store = streaming_env
    sessions = env.new_client(store=store)
    for i in range(3):
        async for _ in sessions.stream(env.agent, "ops", f"message {i}", turn_id=f"t{i}"):
            pass
    report = await sessions.describe(env.agent, "ops")
    assert report.checkpoint.turn == 3
    await sessions.pause(env.agent, "ops", "maintenance")
    with pytest.raises(SessionPausedError):
        async for _ in sessions.stream(env.agent, "ops", "refused", turn_id="t-paused"):
            pass
    await sessions.resume(env.agent, "ops")
    compacted = await sessions.compact(env.agent, "ops", strategy="recent", max_messages=2)
    assert compacted.checkpoint.turn == 3
    # Migrated to another queue (a worker on the same database), it streams there too.
    async with env_factory(env.database_url, task_queue=env.task_queue + "-b") as second:
        await sessions.migrate(env.agent, "ops", second.task_queue)
        moved = second.new_client(store=store)
        events = [e async for e in moved.stream(env.agent, "ops", "after the move", turn_id="t3")]
        final = events[-1]
        assert isinstance(final, FinalEvent) and final.result.turn == 4
        assert replayed_text(events) == final.result.reply.content
    assert_exactly_once(
        await sql_messages(env.database_url, env.agent, "ops"), ["t0", "t1", "t2", "t3"]
    )
