"""The real Temporal Web UI shows encrypted payloads decoded through the codec server.

The dev server's UI is pointed at an in-process codec server (``--ui-codec-endpoint``); the
system Chromium, driven by Playwright, opens the session's page. From the allowed origin the
browser's CORS calls succeed and the workflow input shows in clear; once the codec server no
longer allows the UI's origin, the browser blocks the calls and the page shows ciphertext.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest

from statecore.contract._session import workflow_id_for
from statecore.temporal._devserver import DevServer, free_port
from statecore.temporal._encryption import EncryptionCodec, Keyring, generate_key
from statecore.temporal.codec_server import CodecServer
from tests.browser import async_api, headless_chromium, needs_chromium, wait_for_web_ui
from tests.dbs import fresh_database
from tests.temporal.conftest import logged_dev_server, running_env

expect = async_api.expect

UI_TIMEOUT_MS = 30_000
SECRET = "qv7-heliotrope-cipher-90210"

pytestmark = [pytest.mark.temporal, pytest.mark.slow, needs_chromium]


@pytest.fixture
def codec() -> EncryptionCodec:
    return EncryptionCodec(Keyring([("ui-key", generate_key())]))


@pytest.fixture
def ui_port() -> int:
    return free_port()


@pytest.fixture
def codec_server(codec: EncryptionCodec, ui_port: int) -> AsyncIterator[CodecServer]:
    server = CodecServer(codec, port=0, allowed_origins=[f"http://127.0.0.1:{ui_port}"]).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def ui_server(
    codec_server: CodecServer, ui_port: int, tmp_path: Path
) -> AsyncIterator[DevServer]:
    codec_endpoint = ["--ui-codec-endpoint", codec_server.url]
    async with logged_dev_server(tmp_path, ui_port=ui_port, extra_args=codec_endpoint) as server:
        await wait_for_web_ui(server)
        yield server


async def test_the_web_ui_shows_payloads_decoded_by_the_codec_server(
    ui_server: DevServer, codec_server: CodecServer, codec: EncryptionCodec
) -> None:
    agent, session = f"agent-{uuid.uuid4().hex[:8]}", "ui"
    async with (
        fresh_database("sqlite", "encryption-ui") as url,
        running_env(ui_server, url, codec=codec) as env,
    ):
        await env.sessions.send(agent, session, "hello", system_prompt=f"You guard {SECRET}.")
        workflow_id = workflow_id_for(agent, session)
        handle = env.client.get_workflow_handle(workflow_id)
        run_id = (await handle.describe()).run_id
        started = (await handle.fetch_history()).events[0]
        [sealed_input] = started.workflow_execution_started_event_attributes.input.payloads
        ciphertext_shown = base64.b64encode(sealed_input.data).decode()[:24]
        page_path = f"/namespaces/default/workflows/{quote(workflow_id, safe='')}/{run_id}/history"

        async with headless_chromium() as browser:
            decode_calls: list[str] = []

            async def open_session_page() -> async_api.Page:
                context = await browser.new_context(base_url=ui_server.ui_url)
                context.set_default_timeout(UI_TIMEOUT_MS)
                page = await context.new_page()
                page.on(
                    "request",
                    lambda r: decode_calls.append(r.url) if r.method == "POST" else None,
                )
                await page.goto(page_path)
                return page

            # The workflow input (the session's system prompt) shows decoded.
            page = await open_session_page()
            await expect(page.get_by_text(f"You guard {SECRET}.").first).to_be_visible(
                timeout=UI_TIMEOUT_MS
            )
            assert any(call.startswith(f"{codec_server.url}/decode") for call in decode_calls)

            # From an origin the codec server does not allow, the browser refuses the
            # responses: the UI reports it and shows the ciphertext instead.
            codec_server.allowed_origins = frozenset({"https://ui.elsewhere.example"})
            page = await open_session_page()
            failed = page.locator("text=Codec Server could not connect >> visible=true")
            await expect(failed.first).to_be_visible(timeout=UI_TIMEOUT_MS)
            await expect(page.get_by_text(ciphertext_shown).first).to_be_visible(
                timeout=UI_TIMEOUT_MS
            )
            assert SECRET not in await page.content()
