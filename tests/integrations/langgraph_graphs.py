"""A LangGraph chat graph with plain Python nodes (no LLM), for graph-as-a-turn tests.

- "weather in X": the assistant calls the ``weather`` tool, the tool node answers, and the
  assistant replies "weather: sunny in X";
- "approve X": the approval node stops at ``interrupt()`` asking "may I X?", and replies
  "X: <answer>" once resumed;
- "explode": the assistant raises;
- anything else: "you said: <text> (<n> user messages so far)", n counted from the thread.

Each node run appends its name to ``calls_file`` (when given) before it works, so a test can
count runs and know a node is under way; the tool node then sleeps ``delay`` seconds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_graph(calls_file: Path | None = None, delay: float = 0.0) -> StateGraph[Any]:
    def mark(node: str) -> None:
        if calls_file is not None:
            with calls_file.open("a") as f:
                f.write(node + "\n")

    def assistant(state: Chat) -> dict[str, Any]:
        mark("assistant")
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(f"weather: {last.content}")]}
        text = str(last.content)
        if text == "explode":
            raise RuntimeError("the node exploded")
        if text.startswith("weather in "):
            city = text.removeprefix("weather in ")
            call = {"name": "weather", "args": {"city": city}, "id": f"call-{city}"}
            return {"messages": [AIMessage("", tool_calls=[call])]}
        said = sum(isinstance(m, HumanMessage) for m in state["messages"])
        return {"messages": [AIMessage(f"you said: {text} ({said} user messages so far)")]}

    def tools(state: Chat) -> dict[str, Any]:
        mark("tools")
        time.sleep(delay)
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {
            "messages": [
                ToolMessage(f"sunny in {c['args']['city']}", tool_call_id=c["id"])
                for c in last.tool_calls
            ]
        }

    def approval(state: Chat) -> dict[str, Any]:
        mark("approval")
        what = str(state["messages"][-1].content).removeprefix("approve ")
        answer = interrupt({"question": f"may I {what}?"})
        return {"messages": [AIMessage(f"{what}: {answer}")]}

    def start(state: Chat) -> str:
        text = str(state["messages"][-1].content)
        return "approval" if text.startswith("approve ") else "assistant"

    def after_assistant(state: Chat) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(Chat)
    builder.add_node("assistant", assistant)
    builder.add_node("tools", tools)
    builder.add_node("approval", approval)
    builder.add_conditional_edges(START, start, ["approval", "assistant"])
    builder.add_conditional_edges("assistant", after_assistant, ["tools", END])
    builder.add_edge("tools", "assistant")
    builder.add_edge("approval", END)
    return builder
