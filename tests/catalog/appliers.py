"""How each kind of catalog entry is applied, and the error code it produced.

``prepare`` runs before the stored rows are read (for entries that need a second actor);
``act`` applies the bad input and returns the statecore error code the caller saw. A call
that succeeds, or fails without a statecore code, fails the test with what happened.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from statecore.core._errors import ERRORS_BY_CODE, StatecoreError
from statecore.operations._bundle_format import canonical_json
from statecore.operations._bundles import dump_bundle, export_session, import_session, load_bundle
from statecore.store import open_store
from statecore.temporal._client import AgentSessionClient
from tests.catalog.bad_inputs import (
    BundleImport,
    ClientCall,
    Entry,
    Query,
    Signal,
    TurnApi,
    Update,
)
from tests.catalog.conftest import CatalogEnv
from tests.catalog.subjects import Subject


def _rewrite(data: bytes, change: Callable[[dict[str, Any]], Any]) -> bytes:
    """Change a bundle's content and recompute its checksum, as a careful forger would."""
    envelope = json.loads(data)
    change(envelope["content"])
    envelope["sha256"] = hashlib.sha256(canonical_json(envelope["content"])).hexdigest()
    return canonical_json(envelope)


def _edited(data: bytes) -> bytes:
    changed = data.replace(b"seed message", b"SEED MESSAGE")
    assert changed != data
    return changed


def _first_message(change: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    return lambda content: change(content["messages"][0])


BUNDLE_DEFECTS: dict[str, Callable[[bytes], bytes]] = {
    "none": lambda data: data,
    "truncated": lambda data: data[: len(data) // 2],
    "not_json": lambda data: b"PK\x03\x04 a zip archive, not a bundle",
    "empty": lambda data: b"",
    "wrong_format": lambda data: _rewrite(data, lambda c: c.update(format="statecore.other")),
    "schema_version": lambda data: _rewrite(data, lambda c: c.update(schema_version=3)),
    "checksum": _edited,
    "seq_gap": lambda data: _rewrite(data, lambda c: c["messages"][1].update(seq=5)),
    "token_totals": lambda data: _rewrite(
        data, _first_message(lambda m: m.update(cumulative_tokens=m["cumulative_tokens"] + 1))
    ),
    "bad_id": lambda data: _rewrite(data, lambda c: c["ref"].update(agent_id="a/b")),
}


async def _temporal(env: CatalogEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [*env.temporal, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _input_files(directory: str, inputs: tuple[str, ...]) -> list[str]:
    """``--input-file`` arguments: a 1 MiB input is too long for one command-line argument."""
    args: list[str] = []
    for number, text in enumerate(inputs):
        path = Path(directory) / f"input-{number}.json"
        path.write_text(text, encoding="utf-8")
        args += ["--input-file", str(path)]
    return args


def _update_code(err: WorkflowUpdateFailedError) -> str:
    cause = err.cause
    assert isinstance(cause, ApplicationError), f"untyped update failure: {cause!r}"
    return str(cause.type)


async def _update(subject: Subject, apply: Update) -> str:
    payloads = [
        RawValue(Payload(metadata={"encoding": apply.encoding.encode()}, data=text.encode()))
        for text in apply.inputs
    ]
    try:
        await subject.handle.execute_update(apply.name, args=payloads)
    except WorkflowUpdateFailedError as err:
        return _update_code(err)
    pytest.fail(f"update {apply.name} accepted the bad input")


async def _signal(env: CatalogEnv, subject: Subject, apply: Signal) -> str:
    with tempfile.TemporaryDirectory() as directory:
        done = await _temporal(
            env,
            "workflow",
            "signal",
            "--workflow-id",
            subject.handle.id,
            "--name",
            apply.name,
            *_input_files(directory, apply.inputs),
        )
    assert done.returncode == 0, done.stderr
    ref = subject.ref
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not (report := await env.sessions.describe(ref.agent_id, ref.session_id)).rejections:
        assert loop.time() < deadline, f"the {apply.name} signal left no rejection in describe"
        await asyncio.sleep(0.1)
    assert [r.operation for r in report.rejections] == [apply.name]
    assert report.checkpoint.status == "active"
    return report.rejections[0].code


async def _query(env: CatalogEnv, subject: Subject, apply: Query) -> str:
    with tempfile.TemporaryDirectory() as directory:
        done = await _temporal(
            env,
            "workflow",
            "query",
            "--workflow-id",
            subject.handle.id,
            "--name",
            "describe",
            *_input_files(directory, apply.inputs),
        )
    assert done.returncode != 0, f"describe answered a bad argument: {done.stdout[:200]}"
    # A failed query reaches its caller as a message; statecore's lead with their code.
    codes = [code for code in ERRORS_BY_CODE if f"{code}: " in done.stderr]
    assert codes, f"no statecore code in: {done.stderr}"
    return max(codes, key=len)


async def _client(env: CatalogEnv, subject: Subject, apply: ClientCall) -> str:
    try:
        if apply.method == "__init__":
            AgentSessionClient(env.client, task_queue=env.task_queue, **apply.kwargs)
        else:
            ids = {"agent_id": subject.ref.agent_id, "session_id": subject.ref.session_id}
            await getattr(env.sessions, apply.method)(**{**ids, **apply.kwargs})
    except StatecoreError as err:
        return err.code
    pytest.fail(f"AgentSessionClient.{apply.method} accepted the bad input")


async def _bundle(env: CatalogEnv, subject: Subject, apply: BundleImport) -> str:
    store = await open_store(env.database_url)
    try:
        data = BUNDLE_DEFECTS[apply.defect](dump_bundle(await export_session(store, subject.ref)))
        try:
            await import_session(
                store, load_bundle(data), target=subject.ref, replace=apply.replace
            )
        except StatecoreError as err:
            return err.code
    finally:
        await store.close()
    pytest.fail(f"the bundle with defect {apply.defect!r} was imported")


async def _wait_held(subject: Subject) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while await subject.handle.query("held", result_type=int) < 1:
        assert loop.time() < deadline, "the held turn never read the state"
        await asyncio.sleep(0.05)


async def prepare(subject: Subject, entry: Entry) -> None:
    """Start what must happen before the rows are read: for a stale-version entry, a turn
    that has read the state and waits, and a second turn that then moves the version on."""
    apply = entry.apply
    if not (isinstance(apply, TurnApi) and apply.concurrent_state_write):
        return
    subject.pending["held"] = await subject.handle.start_update(
        "turn", dict(apply.request), wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=int
    )
    await _wait_held(subject)
    writer = {"turn_id": "concurrent", "notes_size": 5}
    subject.pending["turns"] = await subject.handle.execute_update("turn", writer, result_type=int)


async def _turn(subject: Subject, apply: TurnApi) -> str:
    try:
        if apply.concurrent_state_write:
            await subject.handle.signal("release")
            await subject.pending["held"].result()
        else:
            await subject.handle.execute_update("turn", dict(apply.request), result_type=int)
    except WorkflowUpdateFailedError as err:
        return _update_code(err)
    pytest.fail("the turn committed the bad input")


async def act(env: CatalogEnv, subject: Subject, entry: Entry) -> str:
    """Apply the entry's bad input; returns the statecore error code the caller got."""
    apply = entry.apply
    if isinstance(apply, Update):
        return await _update(subject, apply)
    if isinstance(apply, Signal):
        return await _signal(env, subject, apply)
    if isinstance(apply, Query):
        return await _query(env, subject, apply)
    if isinstance(apply, ClientCall):
        return await _client(env, subject, apply)
    if isinstance(apply, BundleImport):
        return await _bundle(env, subject, apply)
    return await _turn(subject, apply)
