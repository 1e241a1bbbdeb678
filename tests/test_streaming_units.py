"""Streaming's parts on their own: the offline model's stream, the reader's cursor, the
position's wire form and the activity's writer (coalescing, attempts, failures)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from statecore.activities._stream_writer import StreamWriter
from statecore.contract._session import ReplyMessage, TurnResult
from statecore.contract._streams import (
    FinalEvent,
    RestartedEvent,
    StreamCursor,
    StreamPosition,
    TextEvent,
    ToolCallEvent,
)
from statecore.core._errors import InvalidInputError
from statecore.core._models import Message, SessionRef, ToolCall
from statecore.llm import ModelRequest, ModelResponse, OfflineModel
from statecore.llm._base import TextDelta, ToolCallDelta, stream_reply
from statecore.store import MemoryStateStore

REF = SessionRef(agent_id="a", session_id="s")


def result_for(text: str) -> TurnResult:
    return TurnResult(
        turn=1, turn_id="t", reply=ReplyMessage(content=text), first_seq=1, last_seq=2
    )


async def test_the_offline_stream_joins_to_the_reply() -> None:
    request = ModelRequest(messages=[Message(role="user", content="one  two\nthree ")])
    items = [i async for i in OfflineModel().stream(request)]
    response = items[-1]
    assert isinstance(response, ModelResponse)
    deltas = [i.text for i in items if isinstance(i, TextDelta)]
    assert len(deltas) > 5 and "".join(deltas) == response.message.content
    assert response == await OfflineModel().complete(request)


async def test_the_offline_stream_ends_with_its_tool_calls() -> None:
    from statecore.llm import ToolSpec

    request = ModelRequest(
        messages=[Message(role="user", content='use tool lookup {"q": 1}')],
        tools=[ToolSpec(name="lookup")],
    )
    items = [i async for i in OfflineModel().stream(request)]
    calls = [i.call for i in items if isinstance(i, ToolCallDelta)]
    assert isinstance(items[-1], ModelResponse) and calls == items[-1].message.tool_calls


async def test_a_model_that_does_not_stream_answers_in_one_piece() -> None:
    class Plain:
        name = "plain"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            return await OfflineModel().complete(request)

    request = ModelRequest(messages=[Message(role="user", content="hi")])
    items = [i async for i in stream_reply(Plain(), request)]
    assert len(items) == 1 and isinstance(items[0], ModelResponse)


def test_token_delay_is_checked() -> None:
    for bad in (-1, float("nan"), True, "1", 61):
        with pytest.raises(InvalidInputError):
            OfflineModel(token_delay=bad)  # type: ignore[arg-type]


def test_the_cursor_follows_rows_and_finishes_from_the_commit() -> None:
    cursor = StreamCursor("t")
    events: list[Any] = cursor.on_row(1, "Hel", ())
    events += cursor.on_row(1, "Hel", ())  # nothing new
    events += cursor.on_row(1, "Hello", ())
    assert [e.text for e in events] == ["Hel", "lo"]
    assert [e.offset for e in events] == [0, 3]
    done = cursor.on_commit(Message(role="assistant", content="Hello!"), result_for("Hello!"))
    assert [type(e) for e in done] == [TextEvent, FinalEvent]
    assert done[0].text == "!"


def test_a_new_attempt_is_a_restart_and_an_older_row_is_ignored() -> None:
    cursor = StreamCursor("t")
    cursor.on_row(1, "abc", ())
    events: list[Any] = cursor.on_row(2, "", ())
    assert isinstance(events[0], RestartedEvent) and events[0].attempt == 2
    assert cursor.on_row(1, "abcdef", ()) == []  # the old attempt, read late
    events = cursor.on_row(2, "xy", ())
    assert isinstance(events[0], TextEvent) and events[0].offset == 0
    # A reader that saw nothing yet and meets attempt 2 first: no restart to report.
    fresh = StreamCursor("t")
    assert [type(e) for e in fresh.on_row(2, "x", ())] == [TextEvent]


def test_a_commit_that_does_not_continue_what_was_read_restarts() -> None:
    cursor = StreamCursor("t")
    cursor.on_row(1, "first attempt", ())
    reply = Message(role="assistant", content="second")
    events: list[Any] = cursor.on_commit(reply, result_for("second"))
    assert [type(e) for e in events] == [RestartedEvent, TextEvent, FinalEvent]
    assert events[0].attempt is None and events[1].text == "second"


def test_tool_calls_are_delivered_once_each() -> None:
    call = ToolCall(id="c", name="f")
    cursor = StreamCursor("t")
    events: list[Any] = cursor.on_row(1, "", (call,))
    events += cursor.on_row(1, "", (call,))
    assert [type(e) for e in events] == [ToolCallEvent]
    reply = Message(role="assistant", content="", tool_calls=[call])
    done = cursor.on_commit(reply, result_for(""))
    assert [type(e) for e in done] == [FinalEvent]


def test_a_position_round_trips_and_a_bad_one_is_refused() -> None:
    cursor = StreamCursor("t")
    events: list[Any] = cursor.on_row(3, "héllo", ())
    position = events[-1].position
    assert StreamPosition.parse(str(position)) == position
    resumed = StreamCursor("t", StreamPosition.parse(str(position)))
    done = resumed.on_commit(
        Message(role="assistant", content="héllo world"), result_for("héllo world")
    )
    assert [type(e) for e in done] == [TextEvent, FinalEvent] and done[0].text == " world"
    for bad in ("", "1.2", "a.b.c.d", "1.2.3.zz", "1.2.3.4.5", "-1.0.0.0"):
        with pytest.raises(InvalidInputError):
            StreamPosition.parse(bad)


async def test_the_writer_coalesces_and_never_blocks_the_model() -> None:
    store = MemoryStateStore()
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
    writes: list[str] = []
    streams = store.turn_streams
    real_write = streams.write

    async def slow_write(*args: Any, **kwargs: Any) -> bool:
        writes.append(args[3])
        await asyncio.sleep(0.05)  # a slow database
        return await real_write(*args, **kwargs)

    streams.write = slow_write  # type: ignore[method-assign]
    writer = StreamWriter(streams, REF, "t", 1, 0.01)
    writer.start()
    loop = asyncio.get_running_loop()
    started = loop.time()
    for i in range(100):
        writer.add_text(f"w{i} ")  # returns at once, whatever the database does
        await asyncio.sleep(0.002)
    assert loop.time() - started < 1.0
    await writer.stop()
    # Far fewer writes than deltas; each write is the whole text so far.
    assert 1 <= len(writes) < 20
    assert all(w.startswith("w0 ") for w in writes if w)
    row = await streams.read(REF, "t")
    assert row is not None and row.attempt == 1
    await writer.finish()
    assert await streams.read(REF, "t") is None


async def test_a_retry_announces_itself_and_a_failing_database_only_stops_streaming() -> None:
    store = MemoryStateStore()
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
    streams = store.turn_streams
    await streams.write(REF, "t", 1, "old attempt")
    writer = StreamWriter(streams, REF, "t", 2, 0.01)
    writer.start()
    for _ in range(100):
        row = await streams.read(REF, "t")
        if row is not None and row.attempt == 2:
            break
        await asyncio.sleep(0.01)
    assert row is not None and (row.attempt, row.text) == (2, "")
    await writer.stop()

    async def broken(*args: Any, **kwargs: Any) -> bool:
        raise ConnectionError("database gone")

    streams.write = broken  # type: ignore[method-assign]
    failing = StreamWriter(streams, REF, "t", 3, 0.01)
    failing.start()
    failing.add_text("x")
    await asyncio.sleep(0.05)
    failing.add_text("y")  # still accepted; nothing is written
    await failing.stop()
    assert failing.writes == 0


# --- the model call's activity, run in an ActivityEnvironment ------------------------------------


class Breaking:
    """Streams a few words, then fails with ``error``."""

    name = "breaking"
    streams = True

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise self.error

    async def stream(self, request: ModelRequest) -> Any:
        for word in ("one ", "two ", "three "):
            await asyncio.sleep(0.03)
            yield TextDelta(word)
        raise self.error


async def run_generate(model: Any, turn_id: str) -> tuple[MemoryStateStore, Any]:
    from temporalio.testing import ActivityEnvironment

    from statecore.activities._resources import WorkerResources
    from statecore.activities._turns import TurnActivities
    from statecore.contract._activities import CommitTurnInput, GenerateInput

    store = MemoryStateStore()
    resources = WorkerResources(models={"default": model})
    resources.attach(store)
    message = Message(role="user", content="hello")
    commit = CommitTurnInput(ref=REF, turn_id=turn_id, turn=1, messages=[message])
    request = GenerateInput(ref=REF, turn_id=turn_id, commit=commit, stream=True)
    try:
        outcome: Any = await ActivityEnvironment().run(TurnActivities(resources).generate, request)
    except BaseException as exc:  # the test looks at it
        outcome = exc
    return store, outcome


async def test_a_streamed_turn_commits_and_leaves_no_row() -> None:
    store, outcome = await run_generate(OfflineModel(token_delay=0.01), "t")
    assert outcome.commit is not None and outcome.commit.turn == 1
    assert await store.turn_streams.count(REF) == 0


async def test_a_failing_model_stops_its_writer_and_a_final_failure_removes_the_row() -> None:
    from temporalio.exceptions import ApplicationError

    from statecore.core._errors import ModelError, ModelUnavailableError

    before = len(asyncio.all_tasks())
    # Retryable: the row stays for the retry to replace (readers see the restart then).
    store, outcome = await run_generate(Breaking(ModelUnavailableError("down")), "t1")
    # The activity reports statecore's errors as Temporal failures with their codes.
    assert isinstance(outcome, ApplicationError) and outcome.type == "ModelUnavailable"
    row = await store.turn_streams.read(REF, "t1")
    assert row is not None and row.text.startswith("one ")
    # Not retryable: the turn fails for good, and its row goes.
    store, outcome = await run_generate(Breaking(ModelError("refused")), "t2")
    assert isinstance(outcome, ApplicationError) and outcome.type == "ModelError"
    assert await store.turn_streams.read(REF, "t2") is None
    # Anything else (a bug in the model): the writer stops all the same.
    store, outcome = await run_generate(Breaking(RuntimeError("bug")), "t3")
    assert isinstance(outcome, BaseException) and "bug" in str(outcome)
    await asyncio.sleep(0.05)
    assert len(asyncio.all_tasks()) <= before  # no writer left behind


def test_the_plugin_takes_a_flush_interval_and_checks_it() -> None:
    from statecore.temporal._plugin import StatecorePlugin

    plugin = StatecorePlugin("sqlite+aiosqlite://", stream_flush_seconds=0.005)
    assert plugin.resources.stream_flush_seconds == 0.005
    for bad in (0, -1, True, "0.1", 61):
        with pytest.raises(ValueError):
            StatecorePlugin("sqlite+aiosqlite://", stream_flush_seconds=bad)  # type: ignore[arg-type]
