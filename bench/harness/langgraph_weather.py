"""The LangGraph side-by-side benchmark's chat graph: a model node and one tool node.

Both sides build this same graph (statecore's environment and the official integration's, so
it imports only LangGraph, LangChain's messages and ``bench.harness.fake_openai_server``).
The model is deterministic and in the node (no network): for a user message it calls
``get_weather`` for the city named, and for the tool's result it answers with the same text
the benchmark's fake model server gives (about 600 bytes), so sizes compare with the OpenAI
Agents side by side.

The nodes are async module-level functions, as Temporal's plugin wants of a node it runs as an
activity (it names the activity by the function); the edge function is async too (see
``after_model``). They read their state through
``convert_to_messages``: inside the plugin's activity the state arrives as plain dicts.
Messages carry ids derived from the turn, so no node asks for a random one.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
)
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from bench.harness.fake_openai_server import TOOL_NAME, answer, city_in, weather

GRAPH_NAME = "weather"


class WeatherChat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _turn(messages: list[Any]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


async def model(state: dict[str, Any]) -> dict[str, Any]:
    """The deterministic model: call the tool for the user's city, then answer from its result."""
    messages = convert_to_messages(state["messages"])
    last, turn = messages[-1], _turn(messages)
    if isinstance(last, ToolMessage):
        reply = AIMessage(answer(str(last.content)), id=f"answer-{turn:05d}")
        return {"messages": [reply]}
    city = city_in(str(last.content))
    call = {"name": TOOL_NAME, "args": {"city": city}, "id": f"call_{turn:06d}"}
    return {"messages": [AIMessage("", tool_calls=[call], id=f"tool-call-{turn:05d}")]}


async def tools(state: dict[str, Any]) -> dict[str, Any]:
    """The tool node: runs ``get_weather`` for each call of the model's last message."""
    messages = convert_to_messages(state["messages"])
    last, turn = messages[-1], _turn(messages)
    calls = last.tool_calls if isinstance(last, AIMessage) else []
    return {
        "messages": [
            ToolMessage(weather(c["args"]["city"]), tool_call_id=c["id"], id=f"tool-{turn:05d}-{n}")
            for n, c in enumerate(calls)
        ]
    }


async def after_model(state: dict[str, Any]) -> str:
    # Async like the nodes: a sync edge function runs in an executor thread, which a Temporal
    # workflow's event loop does not provide (NotImplementedError from run_in_executor).
    last = convert_to_messages(state["messages"])[-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def build_weather_graph(
    node_metadata: dict[str, Any] | None = None, state: type[Any] = WeatherChat
) -> StateGraph[Any]:
    """The graph's builder; ``node_metadata`` goes on both nodes (the official plugin reads
    where each runs from it); ``state`` may swap the messages channel's reducer."""
    builder: StateGraph[Any] = StateGraph(state)
    builder.add_node("model", model, metadata=dict(node_metadata or {}))
    builder.add_node("tools", tools, metadata=dict(node_metadata or {}))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", after_model, ["tools", END])
    builder.add_edge("tools", "model")
    return builder
