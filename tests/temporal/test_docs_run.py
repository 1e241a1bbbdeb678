"""Every Python block of the README and docs/ runs as written.

Each block is saved as a file and run by this interpreter in an empty folder, against the
session's dev server and a fresh database, reached the way the blocks say: through
``TEMPORAL_ADDRESS`` and ``STATECORE_DATABASE_URL`` (and ``STATECORE_ENCRYPTION_KEYS``). A
block that names PostgreSQL runs against the local PostgreSQL too. A block that runs a
worker until stopped (``run_worker``) is sent a turn on its task queue and then SIGTERM.

The only block not run is one marked ``<!-- excerpt: path -->``: a simplified excerpt of a
module; the methods it shows are checked to exist in that module.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from statecore import generate_key
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import DevServer
from tests.dbs import fresh_database
from tests.worker_cli import REPO, base_env

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(?:<!-- excerpt: (?P<excerpt>[\w/.]+) -->\n)?```python\n(?P<code>.*?)```", re.S
)
RUN_WITHIN = 120.0
NAMED = re.compile(r"# (?P<file>\w+\.py)\n")


@dataclass(frozen=True)
class Block:
    doc: Path
    number: int
    code: str
    excerpt_of: str | None

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(REPO)}#{self.number}"


def blocks() -> list[Block]:
    found = []
    for doc in DOCS:
        for number, match in enumerate(BLOCK.finditer(doc.read_text()), start=1):
            found.append(Block(doc, number, match["code"], match["excerpt"]))
    return found


RUNNABLE = [b for b in blocks() if b.excerpt_of is None]
EXCERPTS = [b for b in blocks() if b.excerpt_of is not None]
ON_POSTGRES = [b for b in RUNNABLE if "postgresql+asyncpg" in b.code]


def test_the_docs_have_python_blocks_and_excerpts_are_few() -> None:
    assert len(RUNNABLE) >= 8
    assert len(EXCERPTS) <= 4, [b.name for b in EXCERPTS]


@pytest.mark.parametrize("block", EXCERPTS, ids=lambda b: b.name)
def test_an_excerpt_shows_what_its_module_does(block: Block) -> None:
    assert block.excerpt_of is not None
    module = (REPO / block.excerpt_of).read_text()
    for method in set(re.findall(r"\bturn\.([a-z_.]+)\(", block.code)):
        assert f"turn.{method}(" in module, f"{block.name}: turn.{method} not in {block.excerpt_of}"


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.name)
async def test_a_doc_block_runs_as_written_on_sqlite(
    block: Block, dev_server: DevServer, tmp_path: Path
) -> None:
    await run_block(block, dev_server, tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'docs.db'}")


@pytest.mark.postgres
@pytest.mark.parametrize("block", ON_POSTGRES, ids=lambda b: b.name)
async def test_a_doc_block_naming_postgresql_runs_on_it(
    block: Block, dev_server: DevServer, tmp_path: Path
) -> None:
    async with fresh_database("postgresql", "docs") as url:
        await run_block(block, dev_server, tmp_path, url)


async def run_block(block: Block, server: DevServer, folder: Path, database_url: str) -> str:
    """Run ``block`` as a program; returns what it printed."""
    # No top-level await: a block is a program, not a REPL fragment.
    compile(block.code, block.name, "exec")
    # A doc's program split over files names each file on its block's first line
    # (``# plan_agents.py``): they are all saved beside the block, as a reader would.
    for other in blocks():
        named = NAMED.match(other.code)
        if other.doc == block.doc and named:
            (folder / named["file"]).write_text(other.code)
    script = folder / "block.py"
    script.write_text(block.code)
    queue = f"docs-{uuid.uuid4().hex[:8]}"
    env = {
        **base_env(),
        "PYTHONPATH": str(REPO),  # the repository's examples (workflows/, activities/)
        "TEMPORAL_ADDRESS": server.address,
        "STATECORE_DATABASE_URL": database_url,
        "STATECORE_ENCRYPTION_KEYS": f"docs:{generate_key()}",
        "STATECORE_TASK_QUEUE": queue,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        cwd=folder,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        if "run_worker(" in block.code:
            await answers_a_turn(server, queue)
            proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), RUN_WITHIN)
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        await end_sessions_left_on(server, queue)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"{block.name} exited {proc.returncode}:\n{text[-3000:]}"
    assert "Traceback" not in text, f"{block.name}:\n{text[-3000:]}"
    return text


async def test_the_feed_example_run_after_the_plan_example_prints_its_events(
    dev_server: DevServer, tmp_path: Path
) -> None:
    """docs/shared_state.md, as a reader runs it: the plan example, then the feed example on
    the same database, which prints the plan's committed changes (not nothing)."""
    page = [b for b in RUNNABLE if b.doc.name == "shared_state.md"]
    [plan] = [b for b in page if b.code.startswith("# run_plan_example.py")]
    [feed] = [b for b in page if "read_events(" in b.code]
    url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    await run_block(plan, dev_server, tmp_path, url)
    printed = await run_block(feed, dev_server, tmp_path, url)
    events = [line.split() for line in printed.splitlines() if line[:1].isdigit()]
    # The plan's state, the planner's share and the writer's step through it, in order.
    assert [(kind, agent) for _seq, kind, agent in events] == [
        ("state", "planner"),
        ("share", "planner"),
        ("share", "writer"),
    ], printed


async def end_sessions_left_on(server: DevServer, queue: str) -> None:
    """The sessions a block opened outlive its worker (as they would a reader's program); on
    the shared dev server their fixed ids (``customer-42``) would hold a later test's turns
    on this dead queue, so they are terminated here."""
    client = await Client.connect(server.address)
    query = f"TaskQueue = '{queue}' AND ExecutionStatus = 'Running'"
    async for execution in client.list_workflows(query):
        await client.get_workflow_handle(execution.id).terminate("docs test finished")


async def answers_a_turn(server: DevServer, queue: str) -> None:
    """A worker run by the block is polling ``queue``: a turn sent there is answered."""
    client = await Client.connect(server.address, data_converter=pydantic_data_converter)
    sessions = AgentSessionClient(client, task_queue=queue)
    result = await asyncio.wait_for(sessions.send("docs", queue, "hello"), 90)
    assert 'You said: "hello"' in result.reply.content


def test_run_worker_blocks_take_their_task_queue_from_the_environment() -> None:
    """So the test above can find the worker a block starts (and a reader can move it)."""
    for block in RUNNABLE:
        if "run_worker(" in block.code:
            assert 'os.environ.get("STATECORE_TASK_QUEUE"' in block.code, block.name
