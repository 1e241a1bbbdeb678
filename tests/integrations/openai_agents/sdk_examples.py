"""The OpenAI Agents SDK's session examples (``examples/memory/`` of the pinned sdist,
unpacked by scripts/vendor_tests.sh), run as a user would run them, once as shipped and once
with the session's construction changed to ``StatecoreSession``.

``SWAPS`` holds, per example, exactly the text a migrating user changes: the lines that
construct the session (and the import of ``StatecoreSession``). Everything else runs as
shipped, in a copy of ``examples/`` of its own, against a local fake of the Responses API
(``responses_api``), with tracing off, so nothing leaves the machine.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import runpy
import shutil
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import Runner, set_tracing_disabled
from agents.models import openai_provider

from tests.integrations.openai_agents.responses_api import ResponsesAPI

# Nothing leaves the machine: the SDK exports traces to OpenAI when an API key is set.
set_tracing_disabled(True)

ROOT = Path(__file__).resolve().parents[3]
VENDOR = ROOT / ".cache" / "vendor" / "openai-agents-0.24.0"
DATABASE_URL_ENV = "STATECORE_DATABASE_URL"
IMPORT = "import os\n\nfrom statecore.integrations.openai_agents import StatecoreSession\n"


def statecore(session_id: str) -> str:
    """The constructor call that replaces the SDK's."""
    return f'StatecoreSession({session_id}, database_url=os.environ["{DATABASE_URL_ENV}"])'


@dataclass(frozen=True)
class Swap:
    """How one example changes: ``(old, new)`` texts, each ``old`` found exactly once, and
    the session id it had to change (printed by the example), if any."""

    replacements: list[tuple[str, str]]
    renamed_id: tuple[str, str] | None = None


SWAPS: dict[str, Swap] = {
    "sqlite_session_example": Swap(
        [("session = SQLiteSession(session_id)", f"session = {statecore('session_id')}")]
    ),
    "sqlalchemy_session_example": Swap(
        [
            (
                'session = SQLAlchemySession.from_url(\n        "conversation_123",\n'
                '        url="sqlite+aiosqlite:///:memory:",\n        create_tables=True,\n    )',
                f"session = {statecore(repr('conversation_123'))}",
            )
        ]
    ),
    "encrypted_session_example": Swap(
        [
            (
                "underlying_session = SQLiteSession(session_id)",
                f"underlying_session = {statecore('session_id')}",
            )
        ]
    ),
    "compaction_session_example": Swap(
        [('underlying = SQLiteSession(":memory:")', f"underlying = {statecore(repr('demo'))}")]
    ),
    "compaction_session_stateless_example": Swap(
        [('underlying = SQLiteSession(":memory:")', f"underlying = {statecore(repr('demo'))}")]
    ),
    "memory_session_hitl_example": Swap(
        [
            (
                'session = SQLiteSession(":memory:")',
                f"session = {statecore(repr('memory-session'))}",
            )
        ],
        renamed_id=(":memory:", "memory-session"),
    ),
}


@dataclass
class Run:
    """What one run of an example showed."""

    stdout: str
    requests: list[tuple[str, Any]]
    items: list[Any] = field(default_factory=list)
    #: The warnings it raised (a "coroutine ... was never awaited" among them would mean a
    #: session method the example calls without await did nothing).
    warnings: list[str] = field(default_factory=list)


def example_source(name: str, swap: Swap | None) -> str:
    source = (VENDOR / "examples" / "memory" / f"{name}.py").read_text()
    if swap is None:
        return source
    for old, new in swap.replacements:
        if source.count(old) != 1:
            raise AssertionError(f"{name}: expected {old!r} once in the example")
        source = source.replace(old, new)
    lines = source.splitlines(keepends=True)
    # The import goes before the example's first import (after `from __future__`, if any).
    at = next(
        i
        for i, line in enumerate(lines)
        if line.startswith(("import ", "from ")) and not line.startswith("from __future__")
    )
    return "".join([*lines[:at], IMPORT, *lines[at:]])


def run_example(
    name: str, workdir: Path, api: ResponsesAPI, database_url: str | None = None
) -> Run:
    """Run ``name`` as ``python -m examples.memory.<name>`` would, in this process, from a
    fresh copy of ``examples/`` under ``workdir``: as shipped without ``database_url``, with
    the session swapped to StatecoreSession on it otherwise. Records what it printed, what it
    asked ``api``, and the session's items after every ``Runner.run``.

    In-process, not a child process: importing the SDK takes seconds on a loaded machine.
    Call it from a thread with no event loop (the example calls ``asyncio.run``); it changes
    the working directory and ``sys.path`` while it runs, so one at a time."""
    swap = SWAPS[name] if database_url is not None else None
    shutil.copytree(VENDOR / "examples", workdir / "examples")
    (workdir / "examples" / "memory" / f"{name}.py").write_text(example_source(name, swap))
    api.reset()
    items: list[Any] = []
    run = Runner.run

    async def run_and_record(*args: Any, **kwargs: Any) -> Any:
        result = await run(*args, **kwargs)
        session = kwargs.get("session")
        if session is not None:
            # Through JSON, as a file would hold them: what was stored, not live objects.
            items.append(json.loads(json.dumps(await session.get_items(), default=str)))
        return result

    env = {
        "OPENAI_API_KEY": "sk-offline",
        "OPENAI_BASE_URL": api.base_url,
        "EXAMPLES_INTERACTIVE_MODE": "auto",
        DATABASE_URL_ENV: database_url or "",
    }
    saved_env = {key: os.environ.get(key) for key in env}
    saved_cwd = os.getcwd()
    printed = io.StringIO()
    _forget_examples()
    os.environ.update(env)
    os.chdir(workdir)
    sys.path.insert(0, str(workdir))
    Runner.run = run_and_record  # type: ignore[method-assign,assignment]
    try:
        with contextlib.redirect_stdout(printed), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runpy.run_module(f"examples.memory.{name}", run_name="__main__", alter_sys=True)
            gc.collect()
    finally:
        Runner.run = run  # type: ignore[method-assign]
        sys.path.remove(str(workdir))
        os.chdir(saved_cwd)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _forget_examples()
    stdout = printed.getvalue()
    if swap is not None and swap.renamed_id is not None:
        old_id, new_id = swap.renamed_id
        stdout = stdout.replace(new_id, old_id)
    raised = [f"{w.category.__name__}: {w.message}" for w in caught]
    return Run(stdout=stdout, requests=list(api.requests), items=items, warnings=raised)


def _forget_examples() -> None:
    # Each run imports its own copy of examples/, and starts as a fresh process would: the
    # SDK keeps one HTTP client per process, whose connections belong to the event loop of
    # the asyncio.run that made them.
    openai_provider._http_client = None
    for module in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        del sys.modules[module]
