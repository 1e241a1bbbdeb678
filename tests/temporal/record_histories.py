"""Record AgentSession histories for the replay tests.

    .venv/bin/python -m tests.temporal.record_histories

Runs each scenario against a fresh dev server and writes every run's history to
tests/temporal/histories/<scenario>-run<N>.json. Commit them when the workflow changes in a
way that old histories must keep replaying (then guard the change with workflow.patched).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import start_dev_server
from statecore.temporal._plugin import StatecorePlugin

OUT = Path(__file__).parent / "histories"
QUEUE = "record-histories"


async def turns(sc: AgentSessionClient) -> None:
    for i in range(3):
        await sc.send("agent", "turns", f"hello {i}", turn_id=f"t{i}", system_prompt="Be brief.")
    await sc.send("agent", "turns", "hello 0", turn_id="t0")  # duplicate
    await sc.close("agent", "turns")


async def operator(sc: AgentSessionClient) -> None:
    await sc.send("agent", "operator", "first", turn_id="o1")
    handle = sc.handle("agent", "operator")
    await sc.pause("agent", "operator", "maintenance")
    await handle.signal("compact", {"strategy": "bogus"})  # recorded rejection
    await sc.resume("agent", "operator")
    await sc.add_hint("agent", "operator", "prefers short answers")
    await sc.send("agent", "operator", "second " + "word " * 50, turn_id="o2")
    await sc.compact("agent", "operator", strategy="recent", max_messages=2)
    await handle.signal("compact", {"strategy": "tokens", "max_tokens": 64})
    await sc.reset("agent", "operator", ["conversation"])
    await sc.describe("agent", "operator", include_data=True)
    await sc.send("agent", "operator", "third", turn_id="o3")
    await sc.close("agent", "operator", delete_state=True)


async def continued(sc: AgentSessionClient) -> None:
    for i in range(7):
        await sc.send("agent", "continued", f"m{i}", turn_id=f"c{i}", max_turns_per_run=3)
    await sc.close("agent", "continued")


async def summarized(sc: AgentSessionClient) -> None:
    profile = {"max_tokens": 600, "summarization_threshold": 200}
    for i in range(8):
        await sc.send(
            "agent", "summarized", f"point {i}: " + "detail " * 20, turn_id=f"s{i}", profile=profile
        )
    await sc.close("agent", "summarized")


SCENARIOS: dict[str, Callable[[AgentSessionClient], Awaitable[None]]] = {
    "turns": turns,
    "operator": operator,
    "continued": continued,
    "summarized": summarized,
}


async def record() -> None:
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = await start_dev_server()
        try:
            plugin = StatecorePlugin(f"sqlite+aiosqlite:///{tmp}/record.db")
            client = await Client.connect(server.address, plugins=[plugin])
            async with Worker(client, task_queue=QUEUE):
                sc = AgentSessionClient(client, task_queue=QUEUE)
                for name, scenario in SCENARIOS.items():
                    await scenario(sc)
                    handle = sc.handle("agent", name)
                    await handle.result()
                    await write_runs(client, handle.id, name)
        finally:
            server.stop()


async def write_runs(client: Client, workflow_id: str, name: str) -> None:
    runs = [w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    for n, run in enumerate(sorted(runs, key=lambda r: r.start_time), start=1):
        history = await client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
        path = OUT / f"{name}-run{n}.json"
        path.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(record())
