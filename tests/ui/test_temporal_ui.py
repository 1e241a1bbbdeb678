"""An operator's session in the real Temporal Web UI (the UI that ships with the temporal CLI).

The browser is the system Chromium, driven by Playwright (no browser download). In the UI the
operator finds sessions by their search attributes, reads a session's current details, runs the
``describe`` query, and pauses and resumes the session from the "Send a Signal" dialog; each
effect is checked from Python through the public client.

Screenshots of each step are written to ``$STATECORE_UI_SCREENSHOTS`` when it is set (the
operator's guide uses ``docs/images``) and to a temporary directory otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from urllib.parse import quote

import pytest

from statecore.contract._session import session_summary, workflow_id_for
from statecore.core._errors import SessionPausedError
from statecore.temporal._devserver import DevServer, free_port
from tests.browser import async_api, headless_chromium, needs_chromium, wait_for_web_ui
from tests.dbs import fresh_database
from tests.temporal.conftest import Env, logged_dev_server, running_env

Page = async_api.Page
FrameLocator = async_api.FrameLocator
expect = async_api.expect

VIEWPORT = {"width": 1280, "height": 820}
# The UI is a single-page app over a dev server that also runs our worker: be generous.
UI_TIMEOUT_MS = 20_000

AGENT = "support-bot"
ACTIVE = "customer-42"
PAUSED = "customer-7"

pytestmark = [pytest.mark.temporal, pytest.mark.slow, needs_chromium]

Shot = Callable[[str], Awaitable[None]]


@pytest.fixture(scope="module")
async def ui_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    """A dev server of its own, with the Web UI (the shared one in tests/temporal is headless)."""
    logs = tmp_path_factory.mktemp("temporal-ui")
    async with logged_dev_server(logs, ui_port=free_port()) as server:
        await wait_for_web_ui(server)
        yield server


@pytest.fixture
async def ui_env(ui_server: DevServer) -> AsyncIterator[Env]:
    """A worker on the default task queue, as an operator's deployment would run it."""
    async with (
        fresh_database("sqlite", "ui") as url,
        running_env(ui_server, url, task_queue="statecore") as env,
    ):
        yield env


@pytest.fixture
async def page(ui_server: DevServer) -> AsyncIterator[Page]:
    async with headless_chromium() as browser:
        context = await browser.new_context(viewport=VIEWPORT, base_url=ui_server.ui_url)
        # The describe result is read back through the UI's own copy button.
        await context.grant_permissions(
            ["clipboard-read", "clipboard-write"], origin=ui_server.ui_url
        )
        context.set_default_timeout(UI_TIMEOUT_MS)
        expect.set_options(timeout=UI_TIMEOUT_MS)
        yield await context.new_page()


@pytest.fixture
def shot(page: Page, tmp_path: Path) -> Shot:
    folder = Path(os.environ.get("STATECORE_UI_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)

    async def take(name: str) -> None:
        await page.screenshot(path=str(folder / f"{name}.png"))

    return take


async def eventually(check: Callable[[], Awaitable[bool]], what: str, within: float = 20) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        assert loop.time() < deadline, f"not in time: {what}"
        await asyncio.sleep(0.2)


def listed_exactly(env: Env, query: str, ids: set[str]) -> Callable[[], Awaitable[bool]]:
    """Whether a visibility query finds exactly ``ids`` (visibility lags a signal briefly)."""

    async def check() -> bool:
        return {w.id async for w in env.client.list_workflows(query)} == ids

    return check


async def open_workflow_list(page: Page, query: str, count: int) -> None:
    """The workflows page filtered by a visibility query, as an operator would bookmark it."""
    await page.goto(f"/namespaces/default/workflows?query={quote(query)}")
    noun = "Workflow" if count == 1 else "Workflows"
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"{count} {noun}")


async def send_signal(page: Page, name: str, data: str, shot: Shot, shot_name: str) -> None:
    """More Actions -> Send a Signal, pick the signal, type its JSON input, submit."""
    await page.get_by_role("button", name="More Actions").click()
    await page.get_by_role("menuitem", name="Send a Signal").click()
    dialog = page.get_by_role("dialog", name="Send a Signal")
    await dialog.get_by_role("button", name="Select a signal").click()
    # Each option's accessible name is the signal's name followed by its description.
    await dialog.get_by_role("option", name=re.compile(rf"^{re.escape(name)}\b")).click()
    editor = dialog.get_by_role("textbox", name="Data")
    await editor.fill(data)
    await editor.press("Tab")  # the editor hands its text to the form when it loses focus
    await shot(shot_name)
    await dialog.get_by_role("button", name="Submit").click()
    # Toasts do not survive a reload, and every signal here follows one.
    await expect(page.get_by_text("Workflow signaled.").first).to_be_visible()
    await expect(dialog).to_be_hidden()


async def open_current_details(page: Page) -> FrameLocator:
    """The User Metadata tab; returns the frame the UI renders the details' markdown in."""
    # The UI caches what it fetched; a reload shows what the workflow holds now.
    await page.reload()
    await page.get_by_role("tab", name="User Metadata").click()
    heading = page.get_by_role("heading", name="Current Details")
    await expect(heading).to_be_visible()
    frame = heading.locator("xpath=following::iframe[1]")
    await frame.scroll_into_view_if_needed()
    return frame.content_frame


async def metadata_frame(page: Page, heading: str) -> FrameLocator:
    """The frame the User Metadata tab renders one panel's markdown in."""
    title = page.get_by_role("heading", name=heading, exact=True)
    await expect(title).to_be_visible()
    frame = title.locator("xpath=following::iframe[1]")
    await frame.scroll_into_view_if_needed()
    return frame.content_frame


async def test_operator_finds_inspects_pauses_and_resumes_a_session_in_the_web_ui(
    ui_env: Env, page: Page, shot: Shot
) -> None:
    sessions = ui_env.sessions
    active_id, paused_id = workflow_id_for(AGENT, ACTIVE), workflow_id_for(AGENT, PAUSED)
    for i, text in enumerate(
        ["Where is my order 1042?", "It was due on Monday.", "Can you send it express?"]
    ):
        await sessions.send(AGENT, ACTIVE, text, turn_id=f"order-{i}")
    await sessions.send(AGENT, PAUSED, "I want a refund.", turn_id="refund-0")
    await sessions.pause(AGENT, PAUSED, "budget review")
    await eventually(
        listed_exactly(ui_env, 'StatecoreStatus="paused"', {paused_id}), "one paused session"
    )

    # 1. Every paused session, by search attribute.
    await open_workflow_list(page, 'StatecoreStatus="paused"', 1)
    await expect(page.get_by_role("link", name=paused_id)).to_be_visible()
    await expect(page.get_by_role("link", name=active_id)).to_have_count(0)
    await shot("01-paused-sessions")

    # 2. Open sessions that have had a turn: open the active one and read its current details.
    await open_workflow_list(page, 'StatecoreStatus="active" AND StatecoreTurn > 0', 1)
    await page.get_by_role("link", name=active_id).click()
    await expect(page.get_by_role("heading", name=active_id)).to_be_visible()
    before = (await sessions.describe(AGENT, ACTIVE)).checkpoint
    details = await open_current_details(page)
    await expect(details.get_by_text(f"{AGENT} / {ACTIVE} - active")).to_be_visible()
    await expect(
        details.get_by_text(
            f"turn 3 - {before.message_count} messages - {before.token_total} tokens stored"
        )
    ).to_be_visible()
    await shot("02-current-details")

    # 3. The describe query from the Queries tab, with an argument; read its JSON back.
    await page.get_by_role("tab", name="Queries").click()
    await expect(page.get_by_role("button", name="describe", exact=True)).to_be_visible()
    query_arg = page.get_by_role("textbox", name="Query Arg")
    await query_arg.fill('{"include_data": true}')
    await query_arg.press("Tab")
    await page.get_by_role("button", name="Run Query").click()
    result = page.get_by_role("textbox", name="Query Result")
    await expect(result).to_contain_text('"operation": "describe"')
    await shot("03-describe-query")
    # The editor renders only the lines in view; the UI's copy button yields the whole result.
    result_panel = page.get_by_test_id("query-result").locator("..")
    await result_panel.get_by_role("button", name="Click to copy content").click()
    described = json.loads(await page.evaluate("navigator.clipboard.readText()"))
    assert described["session_id"] == ACTIVE and described["agent_id"] == AGENT
    assert described["checkpoint"]["turn"] == 3
    assert described["checkpoint"]["status"] == "active"
    assert described["checkpoint"]["recent_turn_ids"] == ["order-0", "order-1", "order-2"]
    conversation = described["stores"][0]
    assert conversation["name"] == "conversation"
    assert conversation["items"] == before.message_count == 6
    assert conversation["tokens"] == before.token_total

    # 4. Pause from the signal dialog; the session now refuses turns.
    await send_signal(page, "pause", '{"reason": "from the UI"}', shot, "04-signal-pause")

    async def paused() -> bool:
        return (await sessions.describe(AGENT, ACTIVE)).checkpoint.status == "paused"

    await eventually(paused, "the session is paused")
    with pytest.raises(SessionPausedError, match="from the UI"):
        await sessions.send(AGENT, ACTIVE, "Hello?", turn_id="while-paused")
    details = await open_current_details(page)
    await expect(details.get_by_text(f"{AGENT} / {ACTIVE} - paused")).to_be_visible()
    await expect(details.get_by_text("paused: from the UI", exact=True)).to_be_visible()
    await expect(details.get_by_text("last: paused: from the UI")).to_be_visible()
    await shot("05-paused-details")
    await eventually(
        listed_exactly(ui_env, 'StatecoreStatus="paused"', {paused_id, active_id}),
        "two paused sessions",
    )
    await open_workflow_list(page, 'StatecoreStatus="paused"', 2)
    await expect(page.get_by_role("link", name=active_id)).to_be_visible()
    await expect(page.get_by_role("link", name=paused_id)).to_be_visible()
    await shot("06-paused-sessions-after")

    # 5. Resume from the dialog; the next turn is served and shows up in the details.
    await page.get_by_role("link", name=active_id).click()
    await expect(page.get_by_role("heading", name=active_id)).to_be_visible()
    await send_signal(page, "resume", "{}", shot, "07-signal-resume")

    async def active() -> bool:
        return (await sessions.describe(AGENT, ACTIVE)).checkpoint.status == "active"

    await eventually(active, "the session is active again")
    after = await sessions.send(AGENT, ACTIVE, "Hello again?", turn_id="order-3")
    assert after.turn == 4 and not after.duplicate
    details = await open_current_details(page)
    await expect(details.get_by_text(f"{AGENT} / {ACTIVE} - active")).to_be_visible()
    await expect(details.get_by_text("turn 4 - 8 messages")).to_be_visible()
    await shot("08-resumed-details")


async def test_the_web_ui_tells_operators_what_to_type_and_cancellation_closes_the_session(
    ui_env: Env, page: Page, shot: Shot
) -> None:
    sessions, session = ui_env.sessions, "customer-99"
    workflow_id = workflow_id_for(AGENT, session)
    for i, text in enumerate(["Hello", "Where is my parcel?"]):
        await sessions.send(AGENT, session, text, turn_id=f"parcel-{i}")
    await page.goto(f"/namespaces/default/workflows/{quote(workflow_id)}")
    await expect(page.get_by_role("heading", name=workflow_id)).to_be_visible()

    # 1. The session's static summary and details, beside its current details.
    await page.get_by_role("tab", name="User Metadata").click()
    summary = await metadata_frame(page, "Summary")
    await expect(summary.get_by_text(session_summary(AGENT, session))).to_be_visible()
    static_details = await metadata_frame(page, "Details")
    await expect(static_details.get_by_text("Request Cancellation closes")).to_be_visible()
    await expect(page.get_by_text("No summary available")).to_have_count(0)
    await shot("09-summary-and-details")

    # 2. The signal dialog shows each signal's input; a reset sent with {} wipes nothing.
    await page.get_by_role("button", name="More Actions").click()
    await page.get_by_role("menuitem", name="Send a Signal").click()
    dialog = page.get_by_role("dialog", name="Send a Signal")
    await dialog.get_by_role("button", name="Select a signal").click()
    reset_option = dialog.get_by_role("option", name=re.compile(r"^reset\b"))
    await expect(reset_option).to_contain_text('{"all": true} for every store; {} is refused')
    await expect(dialog.get_by_role("option", name=re.compile(r"^pause\b"))).to_contain_text(
        '{"reason": str}'
    )
    await shot("10-signal-descriptions")
    await page.keyboard.press("Escape")
    await send_signal(page, "reset", "{}", shot, "11-signal-reset-empty")

    async def rejected(count: int) -> bool:
        return len((await sessions.describe(AGENT, session)).rejections) == count

    await eventually(lambda: rejected(1), "the empty reset is recorded")
    assert (await sessions.describe(AGENT, session)).checkpoint.message_count == 4
    details = await open_current_details(page)
    await expect(details.get_by_text("last rejection: reset - ResetRefused")).to_be_visible()

    # 3. A misspelled signal name, typed as a custom name: recorded with the valid names.
    await page.get_by_role("button", name="More Actions").click()
    await page.get_by_role("menuitem", name="Send a Signal").click()
    dialog = page.get_by_role("dialog", name="Send a Signal")
    await dialog.get_by_role("button", name="Select a signal").click()
    await dialog.get_by_role("option", name=re.compile(r"^Custom")).click()
    await dialog.get_by_test_id("signal-name").fill("Pause")
    await dialog.get_by_role("button", name="Submit").click()
    await expect(page.get_by_text("Workflow signaled.").first).to_be_visible()
    await eventually(lambda: rejected(2), "the misspelled signal is recorded")
    report = await sessions.describe(AGENT, session)
    assert report.checkpoint.status == "active"
    assert (report.rejections[-1].operation, report.rejections[-1].code) == (
        "Pause",
        "UnknownOperation",
    )
    details = await open_current_details(page)
    await expect(details.get_by_text("last rejection: Pause - UnknownOperation")).to_be_visible()
    await expect(details.get_by_text("the signals are pause, resume, reset")).to_be_visible()
    await shot("12-unknown-signal-details")

    # 4. Request Cancellation: the session closes at a turn boundary and keeps its state.
    await page.get_by_role("button", name="Request Cancellation").click()
    confirm = page.get_by_role("dialog", name="Cancel Workflow")
    await confirm.get_by_role("button", name="Confirm").click()
    await eventually(
        listed_exactly(
            ui_env, f'StatecoreSessionId="{session}" AND StatecoreStatus="closed"', {workflow_id}
        ),
        "the session is closed",
    )
    assert await sessions.status(AGENT, session) == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
    details = await open_current_details(page)
    await expect(details.get_by_text(f"{AGENT} / {session} - closed")).to_be_visible()
    await expect(details.get_by_text("cancellation requested; state kept in SQL")).to_be_visible()
    await shot("13-cancelled-closed")
    reopened = await sessions.send(AGENT, session, "Still there?", turn_id="parcel-2")
    assert reopened.turn == 3
