"""A LangGraph graph's turn streams: a chat model's tokens through the graph's message stream
reach a reader before the turn commits, and node-made replies stream whole."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypedDict

import pytest

from statecore.contract._streams import FinalEvent, TextEvent
from statecore.store import open_store
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.temporal.conftest import running_env
from tests.temporal.test_streaming import replayed_text
from tests.temporal.worker_kill import assert_exactly_once, sql_messages

langchain_core = pytest.importorskip("langchain_core")
langgraph = pytest.importorskip("langgraph")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402

from tests.integrations.langgraph_graphs import build_graph  # noqa: E402

WORDS = [f"token{i} " for i in range(25)]
#: Workflow ids are global on the shared dev server: agent names of this module's own.
CHATTY = f"chatty-{uuid.uuid4().hex[:8]}"
WEATHER = f"weather-{uuid.uuid4().hex[:8]}"


class SlowStreamingChat(BaseChatModel):
    """A chat model that streams its fixed reply a word every 20 ms."""

    @property
    def _llm_type(self) -> str:
        return "slow-streaming"

    def _generate(
        self,
        messages: list[Any],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("".join(WORDS)))])

    async def _astream(
        self,
        messages: list[Any],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for word in WORDS:
            await asyncio.sleep(0.02)
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager is not None:
                await run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def chat_graph() -> StateGraph[Any]:
    model = SlowStreamingChat()

    async def assistant(state: Chat) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(Chat)
    builder.add_node("assistant", assistant)
    builder.add_edge(START, "assistant")
    builder.add_edge("assistant", END)
    return builder


async def test_a_chat_models_tokens_stream_through_the_graph(dev_server: DevServer) -> None:
    async with (
        fresh_database("sqlite", "graph-stream") as url,
        running_env(dev_server, url, agents={CHATTY: chat_graph()}) as env,
    ):
        store = await open_store(url)
        try:
            sessions = env.new_client(store=store)
            events = [e async for e in sessions.stream(CHATTY, "s", "hi", turn_id="g1")]
        finally:
            await store.close()
        final = events[-1]
        assert isinstance(final, FinalEvent)
        assert final.result.reply.content == "".join(WORDS)
        assert replayed_text(events) == final.result.reply.content
        # Token by token, before the commit (a word every 20 ms, written at most every 20).
        assert sum(isinstance(e, TextEvent) for e in events) >= 3, events
        assert_exactly_once(await sql_messages(url, CHATTY, "s"), ["g1"])


async def test_a_tool_loop_graph_streams_its_reply(dev_server: DevServer) -> None:
    async with (
        fresh_database("sqlite", "graph-tools") as url,
        running_env(dev_server, url, agents={WEATHER: build_graph()}) as env,
    ):
        store = await open_store(url)
        try:
            sessions = env.new_client(store=store)
            events = [
                e async for e in sessions.stream(WEATHER, "s", "weather in Paris", turn_id="w1")
            ]
        finally:
            await store.close()
        final = events[-1]
        assert isinstance(final, FinalEvent)
        assert final.result.reply.content == "weather: sunny in Paris"
        assert replayed_text(events) == final.result.reply.content
