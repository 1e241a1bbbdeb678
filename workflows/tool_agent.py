"""ToolAgent: an agent that finishes a task with tools, built on the turn API.

One task is one turn. The workflow asks the model for the next step; when the model calls a
tool, the workflow checkpoints the flow, runs the tool as an ordinary activity (tools are user
code, bound by name in the input), hands the result back and asks again. A text answer ends
the task, and the turn commits its messages, flow checkpoints and orchestration changes in one
SQL transaction.

Why a killed worker loses nothing and repeats nothing: every model call and every tool run is
an activity, and Temporal records each completed activity's result in the workflow history.
A new worker replays that history: completed steps return their recorded results without
running again, and the turn's buffer is rebuilt exactly as it was. Only the step that was
running when the worker died runs again. Nothing reaches SQL before the final commit, which
is idempotent on the turn id, so every message is stored exactly once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import Field, ValidationError, field_validator
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from statecore.contract._activities import (
    ACT_OPEN_SESSION,
    OpenSessionInput,
    SessionSnapshot,
    ToolBinding,
    ToolCallInput,
    ToolCallResult,
)
from statecore.core._errors import InvalidIdentifierError
from statecore.core._models import (
    DEFAULT_NAMESPACE,
    Message,
    SessionRef,
    StatecoreModel,
    ToolCall,
    validate_identifier,
    validate_text,
)
from statecore.workflow import Turn, TurnSession
from statecore.workflow._activity_calls import NON_RETRYABLE_CODES, failure_reason

TOOL_AGENT_WORKFLOW_TYPE = "ToolAgent"
#: The flow step a finished task ends on; its data holds the task's result.
ANSWERED = "answered"
#: Task ids are shorter than other identifiers so that the flow id built from them fits.
MAX_TASK_ID_LENGTH = 100


def tool_agent_workflow_id(agent_id: str, session_id: str, task_id: str) -> str:
    """A workflow id per task, so Temporal itself refuses to run one task twice at once."""
    return f"tool-agent:{agent_id}:{session_id}:{task_id}"


class ToolAgentInput(StatecoreModel):
    """One task. ``task_id`` is the turn id (one task, one turn) and names the task's flow."""

    agent_id: str
    session_id: str
    namespace: str = DEFAULT_NAMESPACE
    task_id: str
    task: str
    #: More user messages, each sent once the model has answered the previous one with text,
    #: in the same turn. They script a multi-step task for a model that takes one step per
    #: message (the offline model); a capable model usually needs none.
    follow_ups: list[str] = Field(default_factory=list)
    tools: list[ToolBinding] = Field(default_factory=list)
    model: str = "default"
    #: A model that never stops calling tools fails the task here instead of looping forever.
    max_tool_calls: int = Field(default=16, ge=1, le=1000)

    @field_validator("agent_id", "session_id", "namespace", "task_id")
    @classmethod
    def _ids(cls, v: str, info: Any) -> str:
        validate_identifier(v, info.field_name)
        if info.field_name == "task_id" and len(v) > MAX_TASK_ID_LENGTH:
            raise InvalidIdentifierError(f"task_id is longer than {MAX_TASK_ID_LENGTH} characters")
        return v

    @field_validator("task")
    @classmethod
    def _task(cls, v: str) -> str:
        return validate_text(v, "task", allow_empty=False)

    @field_validator("follow_ups")
    @classmethod
    def _follow_ups(cls, v: list[str]) -> list[str]:
        return [validate_text(text, "follow-up", allow_empty=False) for text in v]

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, v: list[ToolBinding]) -> list[ToolBinding]:
        names = [t.name for t in v]
        if len(set(names)) != len(names):
            raise InvalidIdentifierError(f"tool names must be unique; got {names}")
        return v

    @property
    def ref(self) -> SessionRef:
        return SessionRef(
            namespace=self.namespace, agent_id=self.agent_id, session_id=self.session_id
        )

    @property
    def flow_id(self) -> str:
        return f"tool-agent.{self.task_id}"


class ToolAgentResult(StatecoreModel):
    task_id: str
    turn: int
    #: The model's last text answer.
    answer: str
    tool_calls: int
    tools_used: list[str] = Field(default_factory=list)
    #: True when the task had finished before: its stored result, and nothing ran again.
    duplicate: bool = False


class ToolAgentProgress(StatecoreModel):
    """Where a running task stands (the ``progress`` query)."""

    step: str = "starting"
    tool_calls: int = 0
    tools_used: list[str] = Field(default_factory=list)


@workflow.defn(name=TOOL_AGENT_WORKFLOW_TYPE)
class ToolAgent:
    def __init__(self) -> None:
        self._progress = ToolAgentProgress()

    @workflow.run
    async def run(self, input: ToolAgentInput) -> ToolAgentResult:
        session = TurnSession(input.ref, model=input.model)
        snapshot: SessionSnapshot = await session.run_sql(
            ACT_OPEN_SESSION, OpenSessionInput(ref=input.ref), SessionSnapshot
        )
        session.turn_number = snapshot.turn
        turn = session.turn(input.task_id)

        # The answered checkpoint commits with the turn, so finding it means the task is done:
        # running it again would repeat every tool's side effects.
        finished = await turn.flow.latest(input.flow_id)
        if finished is not None and finished.step == ANSWERED:
            try:
                return ToolAgentResult.model_validate({**finished.data, "duplicate": True})
            except ValidationError as err:
                # Raised as ApplicationError so the run fails visibly instead of retrying
                # its workflow task forever.
                raise ApplicationError(
                    f"flow {input.flow_id!r} was not written by ToolAgent; use another task_id",
                    type="InvalidInput",
                    non_retryable=True,
                ) from err

        async with turn:
            answer = ""
            for text in [input.task, *input.follow_ups]:
                turn.append(Message(role="user", content=text))
                answer = await self._until_answer(turn, input)
            result = ToolAgentResult(
                task_id=input.task_id,
                turn=session.turn_number + 1,
                answer=answer,
                tool_calls=self._progress.tool_calls,
                tools_used=list(self._progress.tools_used),
            )
            self._checkpoint(turn, input.flow_id, ANSWERED, result.model_dump(mode="json"))
            committed = await turn.commit()
        return result.model_copy(update={"turn": committed.turn, "duplicate": committed.duplicate})

    async def _until_answer(self, turn: Turn, input: ToolAgentInput) -> str:
        """Let the model call tools until it answers the latest user message with text."""
        specs = [t.spec() for t in input.tools]
        while True:
            reply = await turn.generate(tools=specs)
            if not reply.tool_calls:
                return reply.content
            for call in reply.tool_calls:
                if self._progress.tool_calls >= input.max_tool_calls:
                    # Failing the run drops the turn's buffer: SQL never sees a runaway task.
                    raise ApplicationError(
                        f"the model made more than {input.max_tool_calls} tool calls; raise "
                        "max_tool_calls or give it a task it can finish",
                        type="ToolCallLimit",
                        non_retryable=True,
                    )
                self._progress.tool_calls += 1
                # Names come from the bindings, never from the model: they end up in SQL
                # identifiers (flow step, used tools), which a made-up name could break.
                binding = next((t for t in input.tools if t.name == call.name), None)
                step = f"tool.{binding.name}" if binding else "tool.unknown"
                self._checkpoint(
                    turn,
                    input.flow_id,
                    step,
                    {"call_id": call.id, "tool": call.name, "arguments": call.arguments},
                )
                if binding is None:
                    offered = ", ".join(t.name for t in input.tools) or "none"
                    content = f"error: there is no tool named {call.name!r} (offered: {offered})"
                else:
                    content = await self._run_tool(turn, binding, call)
                    turn.used_tool(binding.name)
                    if binding.name not in self._progress.tools_used:
                        self._progress.tools_used.append(binding.name)
                turn.append(Message(role="tool", content=content, tool_call_id=call.id))

    async def _run_tool(self, turn: Turn, binding: ToolBinding, call: ToolCall) -> str:
        try:
            out: ToolCallResult = await workflow.execute_activity(
                binding.activity,
                ToolCallInput(ref=turn.session.ref, turn_id=turn.turn_id, call=call),
                result_type=ToolCallResult,
                start_to_close_timeout=timedelta(seconds=binding.timeout_seconds),
                heartbeat_timeout=(
                    timedelta(seconds=binding.heartbeat_seconds)
                    if binding.heartbeat_seconds
                    else None
                ),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_attempts=binding.max_attempts,
                    non_retryable_error_types=NON_RETRYABLE_CODES,
                ),
            )
        except ActivityError as err:
            # A failed tool is news for the model (bad arguments, a service that is down),
            # not the end of the task: the model sees the error and may try another way.
            return f"error: {failure_reason(err)}"
        return out.content

    def _checkpoint(self, turn: Turn, flow_id: str, step: str, data: dict[str, Any]) -> None:
        # The flow keeps every step (audit, time travel); the orchestration state keeps the
        # latest. Both reach SQL with the turn's commit; until then the workflow history is the
        # durable record, and the progress query shows the step.
        turn.flow.save(flow_id, step, data)
        turn.set_active_step(step)
        self._progress.step = step
        workflow.set_current_details(f"step `{step}` - {self._progress.tool_calls} tool call(s)")

    @workflow.query(name="progress")
    def progress(self) -> ToolAgentProgress:
        """The current step and tool calls so far (SQL shows them once the task commits)."""
        return self._progress.model_copy(deep=True)
