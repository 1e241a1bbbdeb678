"""statecore.web in headless Chromium: the chat page shows tokens before the turn commits, a
reload mid-turn resumes where it was, a killed worker shows the restart and then the whole
reply; and the SSE endpoint itself, resumed with Last-Event-ID."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from statecore.core._models import SessionRef
from statecore.llm import OfflineModel
from statecore.store import StateStore, open_store, run_transaction
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import DevServer
from tests.browser import headless_chromium, needs_chromium
from tests.dbs import fresh_database
from tests.temporal.conftest import Env, running_env
from tests.temporal.worker_kill import (
    assert_exactly_once,
    kill_all,
    sql_messages,
    start_worker_process,
    wait_for_file,
)

uvicorn = pytest.importorskip("uvicorn")

pytestmark = [pytest.mark.temporal, pytest.mark.slow, needs_chromium]

LONG = " ".join(f"word{i}" for i in range(60))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def serving(sessions: AgentSessionClient) -> AsyncIterator[str]:
    """statecore.web's app on a local port, stopped when the block ends."""
    from statecore.web import create_app

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(sessions), host="127.0.0.1", port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    for _ in range(200):
        if server.started:
            break
        await asyncio.sleep(0.05)
    assert server.started, "the web app did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def committed_turns(store: StateStore, ref: SessionRef) -> int:
    return await run_transaction(store, lambda tx: tx.turns.count(ref), read_only=True)


@contextlib.asynccontextmanager
async def slow_env(dev_server: DevServer, delay: float) -> AsyncIterator[tuple[Env, StateStore]]:
    async with (
        fresh_database("sqlite", "web") as url,
        running_env(dev_server, url, models={"default": OfflineModel(token_delay=delay)}) as env,
    ):
        store = await open_store(url)
        try:
            yield env, store
        finally:
            await store.close()


async def test_the_page_streams_and_a_reload_resumes(dev_server: DevServer) -> None:
    async with slow_env(dev_server, 0.06) as (env, store):
        sessions = env.new_client(store=store)
        ref = sessions.ref(env.agent, "page")
        async with serving(sessions) as base, headless_chromium() as browser:
            page = await browser.new_page()
            await page.goto(f"{base}/?agent={env.agent}&session=page")
            await page.fill("#text", LONG)
            await page.click("button")
            reply = page.locator("p.reply").last
            # Tokens on the page while the turn has not committed.
            await page.wait_for_function(
                "() => (document.querySelector('p.reply')?.textContent || '').length > 20"
            )
            assert await reply.get_attribute("data-state") == "streaming"
            assert await committed_turns(store, ref) == 0
            shown_before = await reply.text_content() or ""
            await page.reload()
            # The reloaded page shows what it had and goes on from there.
            reply = page.locator("p.reply").last
            resumed = await reply.text_content() or ""
            assert resumed.startswith(shown_before)
            await page.wait_for_selector("p.reply[data-state=final]", timeout=60_000)
            final = await page.locator("p.reply").last.text_content()
            assert not await page.locator("p.note").count()
        rows = await sql_messages(env.database_url, env.agent, "page")
        assert_exactly_once(rows, [rows[0].turn_id])
        assert final == rows[1].content


async def test_a_killed_worker_shows_the_restart_then_the_whole_reply(
    dev_server: DevServer, tmp_path: Path
) -> None:
    async with fresh_database("sqlite", "web-kill") as url, running_env(dev_server, url) as env:
        queue = env.task_queue + "-web"
        store = await open_store(url)
        sessions = env.new_client(store=store)
        sessions.task_queue = queue
        worker = start_worker_process(
            "tests.temporal.stream_worker_process", dev_server.address, queue, url, tmp_path, 0.06
        )
        replacement = None
        try:
            await wait_for_file(tmp_path / "worker-ready")
            # Open the session with a short heartbeat, so the dead worker's call is retried soon.
            await sessions.send(
                env.agent, "kill", "hello", turn_id="open", model_heartbeat_seconds=2
            )
            async with serving(sessions) as base, headless_chromium() as browser:
                page = await browser.new_page()
                await page.goto(f"{base}/?agent={env.agent}&session=kill")
                await page.fill("#text", LONG)
                await page.click("button")
                await page.wait_for_function(
                    "() => (document.querySelector('p.reply')?.textContent || '').length > 20"
                )
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)
                replacement = start_worker_process(
                    "tests.temporal.stream_worker_process",
                    dev_server.address,
                    queue,
                    url,
                    tmp_path,
                    0.01,
                )
                await page.wait_for_selector("p.reply[data-state=final]", timeout=90_000)
                notes = await page.locator("p.note").all_text_contents()
                assert any("restarted" in note for note in notes), notes
                final = await page.locator("p.reply").last.text_content()
            rows = await sql_messages(url, env.agent, "kill")
            assert_exactly_once(rows, ["open", rows[2].turn_id])
            assert final == rows[3].content
        finally:
            kill_all(worker, replacement)
            await store.close()


def sse_events(body: str) -> list[dict[str, Any]]:
    events = []
    for frame in body.split("\n\n"):
        fields: dict[str, Any] = {}
        for text in frame.splitlines():
            if text.startswith(":"):
                continue
            name, _, value = text.partition(": ")
            fields[name] = value
        if fields:
            events.append(fields)
    return events


async def test_the_endpoint_resumes_from_last_event_id(dev_server: DevServer) -> None:
    async with slow_env(dev_server, 0.02) as (env, store):
        sessions = env.new_client(store=store)
        async with serving(sessions) as base, httpx.AsyncClient(base_url=base) as http:
            path = f"/api/sessions/{env.agent}/sse/turns/t1/events"
            first: list[dict[str, Any]] = []
            async with http.stream("GET", path, params={"content": LONG}, timeout=30) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                buffer = ""
                async for chunk in response.aiter_text():
                    buffer += chunk
                    first = [e for e in sse_events(buffer) if e.get("event") == "text"]
                    if len(first) >= 3 and buffer.endswith("\n\n"):
                        break  # the reader goes away mid-turn
            last_id = first[-1]["id"]
            response = await http.get(
                path, params={"content": LONG}, headers={"Last-Event-ID": last_id}, timeout=60
            )
            rest = sse_events(response.text)
            assert rest[-1]["event"] == "final"
            import json

            result = json.loads(rest[-1]["data"])["result"]
            text = "".join(
                json.loads(e["data"])["text"] for e in first + rest if e["event"] == "text"
            )
            assert text == result["reply"]["content"]
            assert not any(e["event"] == "restarted" for e in rest)
            # A turn id this session never had, followed without content: an error event.
            unknown = await http.get(f"/api/sessions/{env.agent}/sse/turns/nope/events", timeout=30)
            [error] = [e for e in sse_events(unknown.text) if e.get("event") == "error"]
            assert json.loads(error["data"])["error"]["code"] == "TurnNotFound"
            bad = await http.get(path, params={"after": "garbage"}, timeout=30)
            assert bad.status_code == 400
        assert_exactly_once(await sql_messages(env.database_url, env.agent, "sse"), ["t1"])
