"""Payload encryption end to end: a real dev server, the real `temporal` CLI, the codec server.

Two sessions run the same turns with the same secret, one through a worker and client with
the encryption codec and one without. The history exported by the CLI (an outside reader
without the key) must not show the secret for the first and must show it for the second, so
the check itself is known to work.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from statecore.contract._session import SessionReport, workflow_id_for
from statecore.temporal._devserver import DevServer, free_port, start_dev_server
from statecore.temporal._encryption import EncryptionCodec, Keyring, generate_key
from tests.dbs import fresh_database
from tests.temporal.conftest import running_env, temporal_cli

pytestmark = pytest.mark.temporal

SECRET = "qv7-heliotrope-cipher-90210"
KEY_OLD = generate_key()
KEY_NEW = generate_key()
TOKEN = "operator-token-for-tests"
UI_ORIGIN = "http://localhost:8233"
ENCRYPTED = "binary/encrypted"
#: What sdk-core records about a local activity next to its (encrypted) result.
LOCAL_ACTIVITY_MARKER_FIELDS = {
    "seq",
    "attempt",
    "activity_id",
    "activity_type",
    "complete_time",
    "backoff",
    "original_schedule_time",
    "activation_index",
}
#: What the SDK core records for a ``workflow.patched`` marker (the patch's id).
PATCH_MARKER_FIELDS = {"id", "deprecated"}


# --- reading an exported history --------------------------------------------------------------


async def cli(dev_server: DevServer, *args: str) -> str:
    done = await asyncio.to_thread(
        subprocess.run,
        [*temporal_cli(dev_server), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, f"{path}[{i}]")


def b64(value: str) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def plaintext_hits(exported: str) -> list[str]:
    """Where the secret can be read: in the text itself or in any base64 field (payload data)."""
    hits = ["raw text"] if SECRET in exported else []
    for path, value in walk(json.loads(exported)):
        if isinstance(value, str) and SECRET.encode() in (b64(value) or b""):
            hits.append(path)
    return hits


def payloads(history: dict) -> list[tuple[str, dict]]:
    """Every payload in an exported history, with its path: dicts carrying base64 metadata."""
    return [
        (path, node)
        for path, node in walk(history)
        if isinstance(node, dict)
        and isinstance(node.get("metadata"), dict)
        and "encoding" in node["metadata"]
    ]


def encoding_of(payload: dict) -> str:
    return (b64(payload["metadata"]["encoding"]) or b"").decode()


def key_id_of(payload: dict) -> str | None:
    raw = payload["metadata"].get("encryption-key-id")
    return (b64(raw) or b"").decode() if raw else None


# --- two sessions, with and without the codec -----------------------------------------------


@dataclass
class SessionRun:
    agent: str
    session: str
    replies: list[str]
    report: SessionReport
    history_text: str
    metadata_text: str

    @property
    def workflow_id(self) -> str:
        return workflow_id_for(self.agent, self.session)

    @property
    def history(self) -> dict:
        return json.loads(self.history_text)


async def run_session(dev_server: DevServer, codec: EncryptionCodec | None) -> SessionRun:
    agent, session = f"agent-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    async with (
        fresh_database("sqlite", "encryption") as url,
        running_env(dev_server, url, codec=codec) as env,
    ):
        replies = []
        for turn_id, text in (("t1", f"my password is {SECRET}"), ("t2", f"say {SECRET} again")):
            result = await env.sessions.send(agent, session, text, turn_id=turn_id)
            replies.append(result.reply.content)
        await env.sessions.add_hint(agent, session, f"the user's code is {SECRET}")
        await env.sessions.pause(agent, session, reason=f"reviewing {SECRET}")
        report = await env.sessions.describe(agent, session)
        for _ in range(100):  # signals are asynchronous: wait until the pause is applied
            if report.checkpoint.status == "paused":
                break
            await asyncio.sleep(0.1)
            report = await env.sessions.describe(agent, session)
        wf = workflow_id_for(agent, session)
        history = await cli(dev_server, "workflow", "show", "--workflow-id", wf, "--output", "json")
        # Current details (set_current_details) come back through the built-in metadata query.
        metadata = await cli(
            dev_server, "workflow", "metadata", "--workflow-id", wf, "--output", "json"
        )
        return SessionRun(agent, session, replies, report, history, metadata)


@pytest.fixture(scope="module")
async def encrypted(dev_server: DevServer) -> SessionRun:
    return await run_session(dev_server, EncryptionCodec(Keyring([("k-2025", KEY_OLD)])))


@pytest.fixture(scope="module")
async def control(dev_server: DevServer) -> SessionRun:
    return await run_session(dev_server, None)


async def test_the_secret_never_appears_in_an_encrypted_history(
    encrypted: SessionRun, control: SessionRun
) -> None:
    assert plaintext_hits(encrypted.history_text) == []
    # The same turns without the codec do show it: the check above can fail.
    control_hits = plaintext_hits(control.history_text)
    assert any("acceptedRequest" in hit for hit in control_hits), control_hits
    assert any("outcome" in hit for hit in control_hits), control_hits


async def test_every_payload_but_search_attributes_is_encrypted(
    encrypted: SessionRun, control: SessionRun
) -> None:
    found = payloads(encrypted.history)
    data = [(path, p) for path, p in found if ".searchAttributes." not in path]
    kinds = {path.split(".")[2] for path, _ in data}
    # Workflow input, update arguments and results, signals, activities, local activities.
    assert {
        "workflowExecutionStartedEventAttributes",
        "workflowExecutionUpdateAcceptedEventAttributes",
        "workflowExecutionUpdateCompletedEventAttributes",
        "workflowExecutionSignaledEventAttributes",
        "activityTaskScheduledEventAttributes",
        "activityTaskCompletedEventAttributes",
        "markerRecordedEventAttributes",
    } <= kinds, kinds
    plain = [(path, p) for path, p in data if encoding_of(p) != ENCRYPTED]
    # Only the SDK's own marker records stay plain: a local activity's (ids, type, timing)
    # and a patch's (its id), written by the SDK core, never through the codec.
    allowed = {
        ".markerRecordedEventAttributes.details.data.": LOCAL_ACTIVITY_MARKER_FIELDS,
        ".markerRecordedEventAttributes.details.patch-data.": PATCH_MARKER_FIELDS,
    }
    assert plain
    for path, p in plain:
        fields = next((f for part, f in allowed.items() if part in path), None)
        assert fields is not None, path
        assert set(json.loads(b64(p["data"]) or b"")) <= fields, path
    sealed = [p for _, p in data if encoding_of(p) == ENCRYPTED]
    assert {key_id_of(p) for p in sealed} == {"k-2025"}
    # Search attributes stay plain JSON for the server to index.
    indexed = [p for path, p in found if ".searchAttributes." in path]
    assert indexed and all(encoding_of(p) == "json/plain" for p in indexed)
    assert not any(encoding_of(p) == ENCRYPTED for _, p in payloads(control.history))


async def test_a_client_holding_the_key_reads_replies_and_reports(encrypted: SessionRun) -> None:
    assert len(encrypted.replies) == 2
    assert all(SECRET in reply for reply in encrypted.replies)  # the offline model echoes
    assert encrypted.report.checkpoint.turn == 2
    assert encrypted.report.checkpoint.status == "paused"


async def test_current_details_come_back_encrypted_through_the_metadata_query(
    encrypted: SessionRun, control: SessionRun
) -> None:
    # The pause reason is part of the session's current details.
    assert plaintext_hits(control.metadata_text) != []
    assert plaintext_hits(encrypted.metadata_text) == []
    [result] = json.loads(encrypted.metadata_text)["queryResult"]["payloads"]
    assert encoding_of(result) == ENCRYPTED


async def test_search_attributes_stay_readable_without_the_key(
    dev_server: DevServer, encrypted: SessionRun
) -> None:
    query = f"StatecoreSessionId = '{encrypted.session}' AND StatecoreStatus = 'paused'"
    listed: list[dict] = []
    for _ in range(100):  # visibility is eventually consistent
        out = await cli(dev_server, "workflow", "list", "--query", query, "--output", "json")
        listed = json.loads(out) if out.strip() else []
        if listed:
            break
        await asyncio.sleep(0.2)
    assert [item["execution"]["workflowId"] for item in listed] == [encrypted.workflow_id]
    fields = listed[0]["searchAttributes"]["indexedFields"]
    assert json.loads(b64(fields["StatecoreAgentId"]["data"]) or b"") == encrypted.agent
    assert json.loads(b64(fields["StatecoreTurn"]["data"]) or b"") == 2


# --- the codec server, as operators run it ----------------------------------------------------


@pytest.fixture(scope="module")
async def codec_server_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """The codec server as an operator starts it: keys and token from the environment."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("codec-server") / "codec-server.log"
    env = {**os.environ, "STATECORE_ENCRYPTION_KEYS": f"k-2025:{KEY_OLD}"}
    env["STATECORE_CODEC_TOKEN"] = TOKEN
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "statecore.temporal.codec_server", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=5) as http:
            for _ in range(150):
                assert process.poll() is None, log_path.read_text()
                try:
                    await http.options(f"{url}/decode", headers={"Origin": UI_ORIGIN})
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def update_input_payload(run: SessionRun) -> dict:
    for event in run.history["events"]:
        accepted = event.get("workflowExecutionUpdateAcceptedEventAttributes")
        if accepted:
            [payload] = accepted["acceptedRequest"]["input"]["args"]["payloads"]
            return payload
    raise AssertionError("no accepted update in the history")


async def test_codec_server_decodes_a_payload_taken_from_the_history(
    encrypted: SessionRun, codec_server_url: str
) -> None:
    sealed = update_input_payload(encrypted)
    assert encoding_of(sealed) == ENCRYPTED
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{codec_server_url}/decode",
            json={"payloads": [sealed]},
            headers={"Authorization": f"Bearer {TOKEN}", "X-Namespace": "default"},
        )
    assert response.status_code == 200, response.text
    [plain] = response.json()["payloads"]
    assert encoding_of(plain) == "json/plain"
    message = json.loads(b64(plain["data"]) or b"")
    assert message["turn_id"] == "t1"
    assert message["content"] == f"my password is {SECRET}"


async def test_codec_server_rejects_a_wrong_token_and_answers_preflight(
    encrypted: SessionRun, codec_server_url: str
) -> None:
    sealed = update_input_payload(encrypted)
    async with httpx.AsyncClient(timeout=10) as http:
        refused = await http.post(
            f"{codec_server_url}/decode",
            json={"payloads": [sealed]},
            headers={"Authorization": "Bearer not-the-token"},
        )
        preflight = await http.options(
            f"{codec_server_url}/decode",
            headers={
                "Origin": UI_ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-namespace",
            },
        )
    assert refused.status_code == 401
    assert SECRET not in refused.text
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == UI_ORIGIN
    assert "x-namespace" in preflight.headers["Access-Control-Allow-Headers"].lower()


async def test_the_temporal_cli_reads_the_history_through_the_codec_server(
    dev_server: DevServer, encrypted: SessionRun, codec_server_url: str
) -> None:
    show = ["workflow", "show", "--workflow-id", encrypted.workflow_id, "--output", "json"]
    decoded = await cli(
        dev_server,
        *show,
        "--codec-endpoint",
        codec_server_url,
        "--codec-auth",
        f"Bearer {TOKEN}",
    )
    hits = plaintext_hits(decoded)
    assert any("acceptedRequest" in hit for hit in hits), hits
    assert not any(encoding_of(p) == ENCRYPTED for _, p in payloads(json.loads(decoded)))


async def test_the_dev_server_ui_can_point_at_the_codec_server(tmp_path: Path) -> None:
    endpoint = "http://127.0.0.1:8081"
    server = await start_dev_server(
        ui_port=free_port(),
        extra_args=["--ui-codec-endpoint", endpoint],
        log_path=str(tmp_path / "dev-server.log"),
    )
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            settings = (await http.get(f"{server.ui_url}/api/v1/settings")).json()
    finally:
        server.stop()
    assert settings["Codec"]["Endpoint"] == endpoint


# --- key rotation under a running session -----------------------------------------------------


async def test_keys_rotate_under_a_running_session(dev_server: DevServer) -> None:
    agent, session = f"agent-{uuid.uuid4().hex[:8]}", "rotating"
    queue = f"tq-{uuid.uuid4().hex[:10]}"
    old = EncryptionCodec(Keyring([("k-old", KEY_OLD)]))
    rotated = EncryptionCodec(Keyring([("k-old", KEY_OLD), ("k-new", KEY_NEW)]))
    async with fresh_database("sqlite", "rotation") as url:
        async with running_env(dev_server, url, task_queue=queue, codec=old) as env:
            first = await env.sessions.send(agent, session, f"before {SECRET}", turn_id="t1")
        # A new worker replays the history written under the old key, then writes new turns
        # under the new one.
        async with running_env(dev_server, url, task_queue=queue, codec=rotated) as env:
            second = await env.sessions.send(agent, session, f"after {SECRET}", turn_id="t2")
            report = await env.sessions.describe(agent, session)
        exported = await cli(
            dev_server,
            "workflow",
            "show",
            "--workflow-id",
            workflow_id_for(agent, session),
            "--output",
            "json",
        )
    assert (first.turn, second.turn, report.checkpoint.turn) == (1, 2, 2)
    assert f"after {SECRET}" in second.reply.content
    history = json.loads(exported)
    accepted = [
        e["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]["input"]["args"]
        for e in history["events"]
        if "workflowExecutionUpdateAcceptedEventAttributes" in e
    ]
    assert [key_id_of(args["payloads"][0]) for args in accepted] == ["k-old", "k-new"]
    sealed = [p for _, p in payloads(history) if encoding_of(p) == ENCRYPTED]
    assert {key_id_of(p) for p in sealed} == {"k-old", "k-new"}
    assert plaintext_hits(exported) == []


@pytest.mark.slow
async def test_a_worker_missing_a_key_stalls_the_session_until_one_holding_it_runs(
    dev_server: DevServer,
) -> None:
    agent, session = f"agent-{uuid.uuid4().hex[:8]}", "missing-key"
    queue = f"tq-{uuid.uuid4().hex[:10]}"
    old = EncryptionCodec(Keyring([("k-old", KEY_OLD)]))
    new_only = EncryptionCodec(Keyring([("k-new", KEY_NEW)]))
    both = EncryptionCodec(Keyring([("k-old", KEY_OLD), ("k-new", KEY_NEW)]))
    show = [
        "workflow",
        "show",
        "--workflow-id",
        workflow_id_for(agent, session),
        "--output",
        "json",
    ]
    async with fresh_database("sqlite", "missing-key") as url:
        async with running_env(dev_server, url, task_queue=queue, codec=old) as env:
            await env.sessions.send(agent, session, "before", turn_id="t1")
        # A worker deployed without the old key cannot replay the session: its workflow task
        # fails with a typed error and nothing is committed; the turn waits.
        async with running_env(dev_server, url, task_queue=queue, codec=new_only) as env:
            pending = asyncio.create_task(env.sessions.send(agent, session, "after", turn_id="t2"))
            failures: list[dict] = []
            for _ in range(150):
                events = json.loads(await cli(dev_server, *show))["events"]
                failures = [e for e in events if "workflowTaskFailedEventAttributes" in e]
                if failures:
                    break
                await asyncio.sleep(0.2)
            assert failures, "the worker without the key should fail the workflow task"
            failure = failures[0]["workflowTaskFailedEventAttributes"]["failure"]
            assert failure["applicationFailureInfo"]["type"] == "UnknownEncryptionKeyError"
            assert failure["message"] == "Encoded failure"  # the message itself is encrypted
            assert not pending.done()
        # Once a worker holding the key runs, the same turn completes exactly once.
        async with running_env(dev_server, url, task_queue=queue, codec=both) as env:
            result = await asyncio.wait_for(pending, timeout=60)
            report = await env.sessions.describe(agent, session)
    assert result.turn == 2
    assert report.checkpoint.turn == 2
