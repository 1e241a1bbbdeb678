"""The conversation bench/turn_bytes.py measured, replayed through LangGraph's SqliteSaver.

The same user messages and the same replies (the ones statecore's turns stored), turn for
turn, through a one-node chat graph checkpointed by ``AsyncSqliteSaver`` in its own SQLite
file, measured the same way: ``dbstat`` pages of the saver's tables (after a WAL checkpoint)
before and after ``window`` turns that follow turn ``turns``. The graph's messages use
LangGraph's default reducer (``add_messages``), what a LangGraph chat uses unless it opts into
``DeltaChannel``; bench/langgraph_bytes.py compares the savers with both reducers.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

#: LangGraph's SqliteSaver tables.
SAVER_TABLES = ("checkpoints", "writes")


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def replaying_graph(replies: Sequence[str], checkpointer: Any) -> Any:
    """A chat graph whose node answers turn n with ``replies[n - 1]``."""

    def reply(state: dict[str, Any]) -> dict[str, Any]:
        turn = len(state["messages"]) // 2 + 1
        return {"messages": [AIMessage(content=replies[turn - 1], id=f"ai-{turn}")]}

    builder: StateGraph[Any] = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=checkpointer)


async def measure_sqlite_saver(
    conversation: Sequence[tuple[str, str]], turns: int, window: int, table_bytes: Any
) -> dict[str, Any]:
    """Bytes per turn LangGraph's AsyncSqliteSaver adds over turns ``turns + 1`` to
    ``turns + window`` of ``conversation`` (user text, reply text) pairs; ``table_bytes(url,
    tables)`` reads the on-disk size of the given tables."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if len(conversation) < turns + window:
        raise ValueError(f"the conversation has {len(conversation)} turns, not {turns + window}")
    users = [user for user, _ in conversation]
    graph_replies = [reply for _, reply in conversation]
    with tempfile.TemporaryDirectory(prefix="statecore-lg-bytes-") as tmp:
        path = f"{tmp}/langgraph.db"
        url = f"sqlite+aiosqlite:///{path}"
        async with AsyncSqliteSaver.from_conn_string(path) as saver:
            await saver.setup()
            graph = replaying_graph(graph_replies, saver)
            config = {"configurable": {"thread_id": "bytes"}}

            async def turn(n: int) -> int:
                message = HumanMessage(content=users[n - 1], id=f"user-{n}")
                result = await graph.ainvoke({"messages": [message]}, config)
                if len(result["messages"]) != 2 * n:
                    raise AssertionError(f"turn {n}: the graph holds {len(result['messages'])}")
                return len(users[n - 1].encode()) + len(graph_replies[n - 1].encode())

            for n in range(1, turns + 1):
                await turn(n)
            before = await table_bytes(url, SAVER_TABLES)
            content_bytes = 0
            for n in range(turns + 1, turns + window + 1):
                content_bytes += await turn(n)
            after = await table_bytes(url, SAVER_TABLES)
    growth = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    per_turn = sum(growth.values()) / window
    return {
        "saver": "langgraph AsyncSqliteSaver (langgraph-checkpoint-sqlite), add_messages",
        "measured_after_turn": turns,
        "turns_measured": window,
        "bytes_per_turn": round(per_turn, 1),
        "message_content_bytes_per_turn": round(content_bytes / window, 1),
        "beyond_messages_per_turn": round(per_turn - content_bytes / window, 1),
        "growth_per_turn_by_table": {
            name: round(g / window, 1) for name, g in sorted(growth.items()) if g
        },
        "total_bytes_at_end": sum(after.values()),
    }
