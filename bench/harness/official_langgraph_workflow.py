"""The benchmark's graph on Temporal's official LangGraph integration (side a).

Runs only in the benchmark's separate environment (``.cache/venv-official-langgraph``, with
``temporalio-langgraph`` and its pinned ``langgraph``), never in statecore's.

A chat session as the integration's README sets one up: a long-running workflow compiles the
registered graph with ``InMemorySaver`` (the checkpointer the README names for graphs that need
one; Temporal's history is what makes it durable) and takes each user message in an update
that runs ``ainvoke`` on the session's thread. Both nodes are marked ``execute_in: activity``,
so every model step and the tool step run as activities.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from temporalio.langgraph import graph

    from bench.harness.langgraph_weather import GRAPH_NAME

WORKFLOW_TYPE = "OfficialGraphChat"
#: The session's one LangGraph thread.
THREAD = {"configurable": {"thread_id": "chat"}}


@workflow.defn(name=WORKFLOW_TYPE)
class OfficialGraphChat:
    def __init__(self) -> None:
        self._app = graph(GRAPH_NAME).compile(checkpointer=InMemorySaver())
        self._turns = 0
        self._closed = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self._closed)
        return self._turns

    @workflow.update
    async def send_message(self, text: str) -> str:
        self._turns += 1
        message = HumanMessage(text, id=f"user-{self._turns:05d}")
        result = await self._app.ainvoke({"messages": [message]}, THREAD)
        return str(result["messages"][-1].content)

    @workflow.signal
    def close(self) -> None:
        self._closed = True
