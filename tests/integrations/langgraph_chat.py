"""The chat graph the LangGraph tests run, and how bytes written are counted.

The benchmarks (``python -m bench.langgraph_bytes``, ``bench.langgraph_side_by_side``) import
it from here (bench may use the tests' harness; tests never import bench), so the tests' byte
counts and the benchmark's describe the same conversation.

One node answers each user message with a deterministic reply (the model is outside what is
measured). Its messages use either LangGraph's default reducer (``add_messages``: the whole
list is one channel value, stored again whenever it changes) or ``DeltaChannel`` (the channel
stores its new messages only, plus a periodic snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

REDUCERS = ("default", "delta")
#: Characters of a user message and of a reply: a short chat.
USER_CHARS = 200
REPLY_CHARS = 600


def append_messages(state: list[AnyMessage], batches: Sequence[Any]) -> list[AnyMessage]:
    """``add_messages`` for DeltaChannel, which hands its reducer a batch of updates."""
    for update in batches:
        state = add_messages(state, update)
    return state


class DefaultChat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages)]


def _reply(state: dict[str, Any]) -> dict[str, Any]:
    turn = len(state["messages"]) // 2 + 1
    text_ = (f"reply {turn}: " + "lorem ipsum dolor sit amet " * 40)[:REPLY_CHARS]
    return {"messages": [AIMessage(content=text_, id=f"ai-{turn}")]}


def build_chat(reducer: str, checkpointer: Any) -> Any:
    """The compiled chat graph with messages under ``reducer`` ("default" or "delta")."""
    if reducer not in REDUCERS:
        raise ValueError(f"reducer must be one of {REDUCERS}")
    builder: StateGraph[Any] = StateGraph(DeltaChat if reducer == "delta" else DefaultChat)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=checkpointer)


def user_message(turn: int) -> dict[str, Any]:
    text_ = (f"question {turn}: " + "what about the weather tomorrow? " * 10)[:USER_CHARS]
    return {"messages": [HumanMessage(content=text_, id=f"user-{turn}")]}


# Bytes of payload each saver has stored: the serialised checkpoints, metadata, channel
# values and writes it sent to the database (not page or index overhead, which differ by
# engine). Differences between two readings are the bytes one turn wrote.
STORED_BYTES_SQL = {
    "statecore": (
        "SELECT (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(meta)), 0) "
        "FROM statecore_graph_checkpoints) "
        "+ (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM statecore_graph_blobs) "
        "+ (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM statecore_graph_writes)"
    ),
    "sqlite": (
        "SELECT (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) "
        "FROM checkpoints) + (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes)"
    ),
    "postgres": (
        "SELECT (SELECT COALESCE(SUM(OCTET_LENGTH(checkpoint::text) "
        "+ OCTET_LENGTH(metadata::text)), 0) FROM checkpoints) "
        "+ (SELECT COALESCE(SUM(OCTET_LENGTH(blob)), 0) FROM checkpoint_blobs) "
        "+ (SELECT COALESCE(SUM(OCTET_LENGTH(blob)), 0) FROM checkpoint_writes)"
    ),
}


async def stored_bytes(engine: AsyncEngine, layout: str) -> int:
    """Payload bytes stored so far in the tables of ``layout`` (a STORED_BYTES_SQL key)."""
    async with engine.connect() as conn:
        return int(await conn.scalar(text(STORED_BYTES_SQL[layout])) or 0)
