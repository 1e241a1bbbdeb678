"""What the kill-a-worker tests share: a worker in its own process group (so SIGKILL takes its
children too), waiting on the marker files it writes, reading back what SQL holds, and the
history measurements that show a turn never carries earlier turns."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from statecore.core._models import SessionRef
from statecore.store import open_store

ROOT = Path(__file__).resolve().parents[2]


def start_worker_process(
    module: str, address: str, queue: str, url: str, markers: Path, delay: float, *extra: str
) -> subprocess.Popen[bytes]:
    """``python -m module address queue url markers delay *extra`` in a new process group; the
    module writes ``markers/worker-ready`` once it polls (removed here first)."""
    (markers / "worker-ready").unlink(missing_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", module, address, queue, url, str(markers), str(delay), *extra],
        cwd=ROOT,
        start_new_session=True,
    )


def start_worker(
    address: str, queue: str, url: str, markers: Path, delay: float
) -> subprocess.Popen[bytes]:
    """The plain AgentSession worker of tests/temporal/worker_process.py."""
    return start_worker_process(
        "tests.temporal.worker_process", address, queue, url, markers, delay
    )


def kill_all(*procs: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL every process group still running, and reap it."""
    for proc in procs:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


async def wait_for_file(path: Path, *, lines: int = 1, within: float = 30.0) -> None:
    for _ in range(int(within * 10)):
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} did not reach {lines} line(s) in {within}s")


async def sql_messages(url: str, agent: str, session: str) -> list:
    store = await open_store(url)
    try:
        async with store.transaction() as tx:
            return await tx.conversation.messages(SessionRef(agent_id=agent, session_id=session))
    finally:
        await store.close()


def assert_exactly_once(rows: list, turn_ids: list[str]) -> None:
    """Every turn stored exactly once, in one contiguous user/assistant pair, in seq order."""
    assert [m.seq for m in rows] == list(range(1, len(rows) + 1))
    assert len(rows) == 2 * len(turn_ids)
    pairs = list(zip(rows[0::2], rows[1::2], strict=True))
    assert all(u.role == "user" and a.role == "assistant" for u, a in pairs)
    assert all(u.turn_id == a.turn_id for u, a in pairs)
    assert sorted(u.turn_id for u, _ in pairs) == sorted(turn_ids)


async def session_status(sessions: Any, agent: str, session: str) -> str:
    report = await sessions.describe(agent, session)
    return str(report.checkpoint.status)


async def until_status(
    read: Callable[[], Awaitable[str]], expected: str, within: float = 15.0
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while (got := await read()) != expected:
        assert loop.time() < deadline, f"status still {got!r}, waited {within}s for {expected!r}"
        await asyncio.sleep(0.1)


async def history_size_and_mentions(handle: Any, marker: bytes) -> tuple[int, int]:
    """The workflow's history size (its events serialized) and how often ``marker`` occurs in
    it: a marker from the first turn that recurs later means a turn carried earlier ones."""
    history = await handle.fetch_history()
    events = [e.SerializeToString() for e in history.events]
    return sum(len(e) for e in events), b"".join(events).count(marker)
