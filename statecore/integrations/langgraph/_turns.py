"""A LangGraph graph as a statecore turn.

``LangGraphAgent(graph)`` is a statecore ``AgentTurnRunner``: a turn's activity calls it in
place of a model, and it runs the graph once (``ainvoke``) with ``StatecoreSaver`` on the
worker's own database as its checkpointer and the session as the thread. The graph's new
messages come back to the activity, which commits them with the turn record in one
transaction. Register a compiled graph (or its ``StateGraph`` builder) with the plugin by name:
``StatecorePlugin(agents={"planner": graph})``.

Every checkpoint a turn writes carries the turn id in its metadata (``statecore_turn_id``).
That is what makes a turn idempotent below the turn record:

* a retried activity (the worker died mid-run) finds the thread's newest checkpoint written by
  its own turn: with tasks still to run it resumes from there (input ``None``), so steps that
  finished are not run or stored again; a run that had finished is not run again at all;
* a turn that raised left checkpoints of a turn that never committed: the next turn forks the
  thread from the newest checkpoint of a committed turn, so the graph never sees them.

An ``interrupt()`` ends the turn: the reply says the graph is waiting and carries the
interrupt's value, and the next turn's user message is the resume value
(``Command(resume=<text>)``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph, StateGraph
from langgraph.types import Command, Interrupt
from pydantic import JsonValue
from sqlalchemy.exc import DBAPIError

from statecore.core._errors import AgentRunError, InvalidInputError, StatecoreError
from statecore.core._models import Message, SessionRef, ToolCall
from statecore.integrations.langgraph._saver import StatecoreSaver
from statecore.operations._agent_turns import AgentTurnOutcome, AgentTurnRequest
from statecore.operations._turn_commit import find_turn
from statecore.store import StateStore, run_transaction

#: The checkpoint metadata key naming the statecore turn that wrote the checkpoint.
TURN_KEY = "statecore_turn_id"
#: Metadata of a reply that ends a turn at an ``interrupt()``.
INTERRUPT_KEY = "langgraph_interrupts"
#: Metadata of every stored message: the LangGraph message id it came from.
MESSAGE_ID_KEY = "langgraph_message_id"
#: LangGraph's own default number of super-steps per invocation.
DEFAULT_RECURSION_LIMIT = 25


def thread_id_for(ref: SessionRef) -> str:
    """The LangGraph thread of a session ('/' never occurs in a statecore id)."""
    return f"statecore/{ref.namespace}/{ref.agent_id}/{ref.session_id}"


class LangGraphAgent:
    """Runs a LangGraph graph for one statecore turn (see the module docstring)."""

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any] | StateGraph[Any, Any, Any, Any],
        *,
        messages_key: str = "messages",
        recursion_limit: int = DEFAULT_RECURSION_LIMIT,
        name: str | None = None,
    ) -> None:
        if not isinstance(graph, CompiledStateGraph | StateGraph):
            raise ValueError(
                f"expected a LangGraph StateGraph or its compiled graph, got {type(graph).__name__}"
            )
        self.graph = graph
        self.messages_key = messages_key
        self.recursion_limit = recursion_limit
        self.name = name or getattr(graph, "name", None) or "LangGraph"
        # The graph bound to the saver of the last store seen (a worker has one store).
        self._bound: tuple[StateStore, CompiledStateGraph[Any, Any, Any, Any]] | None = None

    def _graph_on(self, store: StateStore) -> CompiledStateGraph[Any, Any, Any, Any]:
        if self._bound is not None and self._bound[0] is store:
            return self._bound[1]
        saver = StatecoreSaver.from_store(store)
        if isinstance(self.graph, StateGraph):
            bound = self.graph.compile(checkpointer=saver)
        else:
            # The user's graph keeps its own checkpointer; the turn's copy uses the session's.
            bound = self.graph.copy(update={"checkpointer": saver})
        self._bound = (store, bound)
        return bound

    async def run_turn(self, request: AgentTurnRequest) -> AgentTurnOutcome:
        new = list(request.new_messages)
        if not new or any(m.role != "user" for m in new):
            raise InvalidInputError("a graph turn starts from the user's message(s)")
        graph = self._graph_on(request.store)
        thread = thread_id_for(request.ref)
        config: RunnableConfig = {
            "configurable": {"thread_id": thread, "checkpoint_ns": ""},
            "metadata": {TURN_KEY: request.turn_id},
            "recursion_limit": self.recursion_limit,
        }
        try:
            return await self._run(graph, config, request, new)
        except StatecoreError:
            raise  # the saver's own refusals (a value too large, a corrupt row) as they are
        except DBAPIError:
            raise  # the database is unreachable: Temporal retries the turn
        except Exception as exc:
            # Nothing reached the session's log; the steps this run checkpointed belong to a
            # turn that never commits, and the next turn forks past them.
            raise AgentRunError(
                f"the graph {self.name!r} failed in turn {request.turn_id}: "
                f"{type(exc).__name__}: {exc}",
                agent=self.name,
            ) from exc

    async def _run(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        config: RunnableConfig,
        request: AgentTurnRequest,
        new: list[Message],
    ) -> AgentTurnOutcome:
        saver = graph.checkpointer
        assert isinstance(saver, StatecoreSaver)
        head = await saver.aget_tuple(_at(config))
        run_input: Any
        if head is not None and head.metadata.get(TURN_KEY) == request.turn_id:
            # A retry of this very turn: carry on from its newest checkpoint.
            before = await _turn_start(saver, head, lambda turn: turn != request.turn_id)
            state = await graph.aget_state(config)
            run_input = None if state.next and not state.interrupts else _DONE
            run_config = config
        else:
            base = await _committed_base(saver, head, request.store, request.ref)
            if head is not None and (
                base is None
                or (isinstance(base.metadata.get(TURN_KEY), str) and await _log_was_reset(request))
            ):
                # No committed turn wrote the thread (the turns that did were reset with the
                # session's conversation, or every turn so far failed): the graph starts
                # afresh, as the conversation does.
                await saver.adelete_thread(config["configurable"]["thread_id"])
                head = base = None
            before = base
            run_config = config
            if base is not None and head is not None and base.config != head.config:
                # The newest checkpoints belong to a turn that failed: fork past them.
                run_config = _with_checkpoint(config, base.config)
            pending = (await graph.aget_state(run_config)).interrupts if base is not None else ()
            if pending:
                text = "\n".join(m.content for m in new)
                resume: Any = text if len(pending) == 1 else {i.id: text for i in pending}
                run_input = Command(resume=resume)
            else:
                run_input = {
                    self.messages_key: [
                        HumanMessage(content=m.content, id=_input_id(request.turn_id, n))
                        for n, m in enumerate(new)
                    ]
                }
        if run_input is not _DONE:
            if request.on_text is None:
                await graph.ainvoke(run_input, run_config)
            else:
                await _streaming(graph, run_input, run_config, request.on_text)
        after = await graph.aget_state(config)
        earlier = (
            _messages((await graph.aget_state(before.config)).values, self.messages_key)
            if before is not None
            else []
        )
        produced = _new_messages(
            earlier, _messages(after.values, self.messages_key), request.turn_id
        )
        messages = [*new, *produced]
        if after.interrupts:
            reply = _waiting(after.interrupts)
            messages.append(reply)
        else:
            answers = [m for m in produced if m.role == "assistant" and m.content.strip()]
            reply = (
                Message(role="assistant", content=answers[-1].content)
                if answers
                else Message(role="assistant", content="(no output)")
            )
        return AgentTurnOutcome(messages=messages, reply=reply)


#: The run of a retried turn had finished: nothing to run.
_DONE = object()


async def _streaming(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    run_input: Any,
    config: RunnableConfig,
    on_text: Callable[[str], None],
) -> None:
    """Run the graph as ``ainvoke`` does, handing on the text of the AI messages its message
    stream carries: a chat model's tokens as they come, or a node's whole AI message. A turn
    whose reply is not the last of several texts streamed (a tool loop whose first model call
    said something) shows its readers a restart, then the reply, when it commits."""
    async for message, _metadata in graph.astream(run_input, config, stream_mode="messages"):
        if getattr(message, "type", None) not in ("ai", "AIMessageChunk"):
            continue
        content = getattr(message, "content", None)
        if isinstance(content, str) and content:
            on_text(content)


def _at(config: RunnableConfig) -> RunnableConfig:
    return {"configurable": dict(config["configurable"])}


def _with_checkpoint(config: RunnableConfig, at: RunnableConfig) -> RunnableConfig:
    configurable = dict(config["configurable"])
    configurable["checkpoint_id"] = at["configurable"]["checkpoint_id"]
    return {**config, "configurable": configurable}


def _input_id(turn_id: str, n: int) -> str:
    """The id of the turn's n-th user message in the graph's state: the same on a retry."""
    return f"statecore-{turn_id}-{n}"


async def _turn_start(saver: StatecoreSaver, head: Any, is_other_turn: Any) -> Any:
    """The checkpoint the current turn started from: the newest ancestor of ``head`` that
    another turn wrote (None: the turn started the thread)."""
    tuple_ = head
    while tuple_ is not None and not is_other_turn(tuple_.metadata.get(TURN_KEY)):
        if tuple_.parent_config is None:
            return None
        tuple_ = await saver.aget_tuple(tuple_.parent_config)
    return tuple_


async def _committed_base(
    saver: StatecoreSaver, head: Any, store: StateStore, ref: SessionRef
) -> Any:
    """The newest checkpoint on ``head``'s chain written by a committed turn (or by no turn:
    the thread was written outside statecore)."""
    committed: dict[str, bool] = {}

    async def is_committed(turn: Any) -> bool:
        if not isinstance(turn, str):
            return True
        if turn not in committed:
            found = await run_transaction(
                store, lambda tx: find_turn(tx, ref, turn), read_only=True
            )
            committed[turn] = found is not None
        return committed[turn]

    tuple_ = head
    while tuple_ is not None and not await is_committed(tuple_.metadata.get(TURN_KEY)):
        if tuple_.parent_config is None:
            return None
        tuple_ = await saver.aget_tuple(tuple_.parent_config)
    return tuple_


async def _log_was_reset(request: AgentTurnRequest) -> bool:
    """Whether the session's conversation is empty although the graph has run for it."""
    tail = await run_transaction(
        request.store,
        lambda tx: tx.conversation.tail(request.ref, max_messages=1),
        read_only=True,
    )
    return not tail


def _messages(values: Any, key: str) -> list[BaseMessage]:
    found = values.get(key, []) if isinstance(values, dict) else []
    return [m for m in found if isinstance(m, BaseMessage)]


def _new_messages(
    earlier: Sequence[BaseMessage], later: Sequence[BaseMessage], turn_id: str
) -> list[Message]:
    """The messages the turn's run added, as statecore messages; the turn's own user
    messages are left out (the log records them as sent)."""
    if all(m.id for m in later):
        seen = {m.id for m in earlier}
        added = [m for m in later if m.id not in seen]
    else:  # a reducer that keeps no ids: the run appended to the list
        added = list(later[len(earlier) :])
    prefix = _input_id(turn_id, 0).removesuffix("0")
    out = []
    for m in added:
        if isinstance(m, HumanMessage) and (m.id or "").startswith(prefix):
            continue
        converted = _to_statecore(m)
        if converted is not None:
            out.append(converted)
    return out


def _to_statecore(m: BaseMessage) -> Message | None:
    """A LangChain message as a statecore message (None: an empty assistant message)."""
    text = _text(m)
    meta: dict[str, JsonValue] = {MESSAGE_ID_KEY: m.id} if m.id else {}
    if isinstance(m, AIMessage):
        calls = [
            ToolCall(
                id=c.get("id") or f"call-{n}",
                name=c["name"],
                arguments=json.dumps(c.get("args", {}), ensure_ascii=False, default=str),
            )
            for n, c in enumerate(m.tool_calls)
        ]
        if not text.strip() and not calls:
            return None
        return Message(role="assistant", content=text, tool_calls=calls, name=m.name, metadata=meta)
    if isinstance(m, ToolMessage):
        return Message(role="tool", content=text, tool_call_id=m.tool_call_id, metadata=meta)
    role = "system" if isinstance(m, SystemMessage) else "user"
    if not text.strip():
        return None
    return Message(role=role, content=text, metadata=meta)


def _text(m: BaseMessage) -> str:
    if isinstance(m.content, str):
        return m.content
    parts = []
    for block in m.content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _waiting(interrupts: Sequence[Interrupt]) -> Message:
    """The reply of a turn that ended at ``interrupt()``: what the graph asks, its value."""
    values = [_jsonable(i.value) for i in interrupts]
    shown = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in values]
    return Message(
        role="assistant",
        content="waiting for input: " + "; ".join(shown),
        metadata={
            INTERRUPT_KEY: [
                {"id": i.id, "value": v} for i, v in zip(interrupts, values, strict=True)
            ]
        },
    )


def _jsonable(value: Any) -> JsonValue:
    result: JsonValue = json.loads(json.dumps(value, ensure_ascii=False, default=str))
    return result
