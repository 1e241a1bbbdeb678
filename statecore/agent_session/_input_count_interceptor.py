"""One input per request for AgentSession's handlers (a worker interceptor).

Each handler of AgentSession takes one raw input. A request carrying several
(``temporal workflow signal --input a --input b``) would call the handler with too many
arguments: a TypeError inside the workflow task, retried forever, and the session would take
no more turns. This interceptor hands such a request to the handler as ``TooManyInputs``,
which the handler rejects and records like any other bad input. The plugin installs it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.worker import (
    HandleQueryInput,
    HandleSignalInput,
    HandleUpdateInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from statecore.contract._session import WORKFLOW_TYPE, TooManyInputs

Request = TypeVar("Request", HandleSignalInput, HandleQueryInput, HandleUpdateInput)


def _one_input(request: Request, handler: object | None) -> Request:
    # Only a named handler takes one input; the dynamic ones (unknown names) receive the
    # name and every input as a list, whatever their count.
    if len(request.args) <= 1 or handler is None:
        return request
    if workflow.info().workflow_type != WORKFLOW_TYPE:
        return request
    return dataclasses.replace(request, args=[TooManyInputs(count=len(request.args))])


class _SingleInputInbound(WorkflowInboundInterceptor):
    async def handle_signal(self, input: HandleSignalInput) -> None:
        handler = workflow.get_signal_handler(input.signal)
        await super().handle_signal(_one_input(input, handler))

    async def handle_query(self, input: HandleQueryInput) -> Any:
        handler = workflow.get_query_handler(input.query)
        return await super().handle_query(_one_input(input, handler))

    def handle_update_validator(self, input: HandleUpdateInput) -> None:
        handler = workflow.get_update_handler(input.update)
        super().handle_update_validator(_one_input(input, handler))

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        handler = workflow.get_update_handler(input.update)
        return await super().handle_update_handler(_one_input(input, handler))


class SingleInputInterceptor(Interceptor):
    """Hands AgentSession requests with more than one input over as ``TooManyInputs``."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _SingleInputInbound
