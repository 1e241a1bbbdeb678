"""Record a ToolAgent history for its replay test.

    .venv/bin/python -m tests.temporal.record_tool_agent_history

Runs one task (calculator, a KV lookup, a tool error) against a fresh dev server and writes
its history to tests/temporal/histories/examples/tool-agent-run1.json. Commit it when the
workflow changes in a way that old histories must keep replaying (then guard the change with
workflow.patched). Example histories live in their own folder: the default replay test
registers only the default workflows.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from activities.tools import CALCULATOR, LOOKUP, example_tools
from statecore.core._models import SessionRef
from statecore.store import open_store
from statecore.temporal._devserver import start_dev_server
from statecore.temporal._plugin import StatecorePlugin
from workflows import EXAMPLE_WORKFLOWS
from workflows.tool_agent import ToolAgent, ToolAgentInput, tool_agent_workflow_id

OUT = Path(__file__).parent / "histories" / "examples" / "tool-agent-run1.json"
QUEUE = "record-tool-agent"

TASK = ToolAgentInput(
    agent_id="agent",
    session_id="tools",
    task_id="task-1",
    task='use tool calculator {"expression": "6*7"}',
    follow_ups=[
        'use tool lookup {"key": "capital"}',
        'use tool calculator {"expression": "1/0"}',
    ],
    tools=[CALCULATOR, LOOKUP],
)


async def record() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = await start_dev_server()
        try:
            url = f"sqlite+aiosqlite:///{tmp}/record.db"
            store = await open_store(url, migrate=True)
            try:
                async with store.transaction() as tx:
                    ref = SessionRef(agent_id=TASK.agent_id, session_id=TASK.session_id)
                    await tx.kv.put(ref.kv_scope, "facts", "capital", "Paris")
            finally:
                await store.close()
            plugin = StatecorePlugin(
                url, extra_workflows=EXAMPLE_WORKFLOWS, activity_factories=[example_tools]
            )
            client = await Client.connect(server.address, plugins=[plugin])
            async with Worker(client, task_queue=QUEUE):
                workflow_id = tool_agent_workflow_id(TASK.agent_id, TASK.session_id, TASK.task_id)
                await client.execute_workflow(ToolAgent.run, TASK, id=workflow_id, task_queue=QUEUE)
                history = await client.get_workflow_handle(workflow_id).fetch_history()
            OUT.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
            print(f"wrote {OUT}")
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(record())
