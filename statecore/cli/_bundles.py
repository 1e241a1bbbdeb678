"""``statecore export`` and ``statecore import``: sessions as portable bundle files.

Export reads the database in one transaction. Turns commit in one transaction too, so a
session exported while its workflow runs is captured between two turns, never inside one.

Import writes the database, which a running session's workflow also writes and caches
counters from: importing over a session whose workflow is running is refused (exit code 4).
Close the session first (``statecore close``), or import under another id with ``--as``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING

from statecore.cli._args import identifier, new_command
from statecore.cli._exits import UnreachableError, UsageError
from statecore.cli._output import print_json, print_note, print_report, stderr
from statecore.cli._settings import Settings
from statecore.contract._session import WORKFLOW_TYPE, workflow_id_for
from statecore.core._errors import AlreadyExistsError, SessionStateError
from statecore.core._models import SessionRef, StateOperationResult

if TYPE_CHECKING:
    from statecore.operations._bundle_format import NamespaceBundle, SessionBundle
    from statecore.store._base import StateStore, StoreTransaction

_SESSION_PAGE = 500


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = new_command(
        commands,
        "export",
        "write a session (or every session of the state namespace) as a bundle file",
    )
    p.add_argument("agent", nargs="?", type=identifier, metavar="AGENT")
    p.add_argument("session", nargs="?", type=identifier, metavar="SESSION")
    p.add_argument(
        "--all",
        action="store_true",
        help="every session of --state-namespace, with its shared KV and scoped states",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(run=export)

    p = new_command(commands, "import", "restore a bundle file into the database")
    p.add_argument("file", metavar="FILE", help="a file written by export ('-' for stdin)")
    p.add_argument(
        "--replace", action="store_true", help="overwrite a target that already holds data"
    )
    p.add_argument(
        "--as",
        dest="target",
        nargs=2,
        type=identifier,
        metavar=("AGENT", "SESSION"),
        help="import a session bundle under another agent and session id",
    )
    p.add_argument(
        "--no-live-check",
        action="store_true",
        help="do not ask Temporal whether the target's workflow is running (only for a "
        "database no worker uses)",
    )
    p.set_defaults(run=import_bundle)


# --- export --------------------------------------------------------------------------------------


async def export(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.operations._bundles import dump_bundle, export_session

    if args.all and args.agent is not None:
        raise UsageError("give AGENT SESSION to export one session, or --all, not both")
    if not args.all and args.session is None:
        raise UsageError("export needs AGENT SESSION, or --all for the whole state namespace")
    async with settings.store() as store:
        if args.all:
            bundle: SessionBundle | NamespaceBundle = await _export_all(store, settings)
        else:
            ref = SessionRef(
                namespace=settings.tenant, agent_id=args.agent, session_id=args.session
            )
            bundle = await export_session(store, ref)
    data = dump_bundle(bundle)
    if args.output in (None, "-"):
        sys.stdout.buffer.write(data + b"\n")
        sys.stdout.flush()
        return 0
    _write_atomically(Path(args.output), data + b"\n")
    summary = _summary(bundle, args.output, len(data))
    if settings.json:
        print_json(summary)
    elif summary["format"] == "namespace":
        print_note(
            f"exported {summary['sessions']} sessions of namespace {summary['namespace']} "
            f"to {args.output}"
        )
    else:
        print_note(
            f"exported {summary['namespace']}/{summary['agent_id']}/{summary['session_id']} "
            f"({summary['messages']} messages) to {args.output}"
        )
    return 0


async def _export_all(store: StateStore, settings: Settings) -> NamespaceBundle:
    from statecore.operations._bundles import export_namespace

    console = stderr()
    if settings.json or not console.is_terminal:
        return await export_namespace(store, settings.tenant)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("exporting sessions"), BarColumn(), MofNCompleteColumn(), console=console
    ) as progress:
        task = progress.add_task("export", total=None)
        return await export_namespace(
            store,
            settings.tenant,
            on_session=lambda done, total: progress.update(task, completed=done, total=total),
        )


def _summary(bundle: SessionBundle | NamespaceBundle, file: str, size: int) -> dict[str, object]:
    from statecore.operations._bundles import SessionBundle

    if isinstance(bundle, SessionBundle):
        return {
            "file": file,
            "format": "session",
            "namespace": bundle.ref.namespace,
            "agent_id": bundle.ref.agent_id,
            "session_id": bundle.ref.session_id,
            "sessions": 1,
            "messages": len(bundle.messages),
            "bytes": size,
        }
    return {
        "file": file,
        "format": "namespace",
        "namespace": bundle.namespace,
        "sessions": len(bundle.sessions),
        "messages": sum(len(s.messages) for s in bundle.sessions),
        "bytes": size,
    }


def _write_atomically(path: Path, data: bytes) -> None:
    """Write the whole file or nothing: a failed export never leaves half a bundle."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc


# --- import --------------------------------------------------------------------------------------


def _read_bundle(file: str) -> SessionBundle | NamespaceBundle:
    from statecore.operations._bundles import load_bundle

    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from exc
    return load_bundle(data)


async def import_bundle(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.operations._bundles import (
        NamespaceBundle,
        SessionBundle,
        import_namespace,
        import_session,
    )

    bundle = _read_bundle(args.file)
    if isinstance(bundle, NamespaceBundle) and args.target:
        raise UsageError("--as renames one session; this file holds a whole namespace")
    async with settings.store() as store:
        if isinstance(bundle, SessionBundle):
            namespace = settings.state_namespace or bundle.ref.namespace
            agent, session = args.target or (bundle.ref.agent_id, bundle.ref.session_id)
            target = SessionRef(namespace=namespace, agent_id=agent, session_id=session)
            if not args.no_live_check:
                await _refuse_live(settings, [target])
            result = await _replace_hint(
                import_session(store, bundle, target=target, replace=args.replace)
            )
            title = f"imported {bundle.ref} as {target}"
        else:
            namespace = settings.state_namespace or bundle.namespace
            if not args.no_live_check:
                targets = [
                    s.ref.model_copy(update={"namespace": namespace}) for s in bundle.sessions
                ]
                if args.replace:  # --replace deletes every session of the namespace first
                    targets += await _stored_sessions(store, namespace)
                await _refuse_live(settings, targets)
            result = await _replace_hint(
                import_namespace(store, bundle, namespace=namespace, replace=args.replace)
            )
            title = f"imported {len(bundle.sessions)} sessions into namespace {namespace}"
    if settings.json:
        print_json(result)
    else:
        print_report(result, title=title)
    return 0


async def _replace_hint(work: Awaitable[StateOperationResult]) -> StateOperationResult:
    """The import, with the library's advice on an occupied target said as the flag."""
    try:
        return await work
    except AlreadyExistsError as exc:
        message = exc.message.replace("replace=True", "--replace")
        raise AlreadyExistsError(message, **exc.details) from exc


async def _stored_sessions(store: StateStore, namespace: str) -> list[SessionRef]:
    from statecore.store._retry import run_transaction

    async def listing(tx: StoreTransaction) -> list[SessionRef]:
        refs: list[SessionRef] = []
        while True:
            page = await tx.sessions.list(
                namespace, limit=_SESSION_PAGE, after=refs[-1] if refs else None
            )
            refs.extend(page)
            if len(page) < _SESSION_PAGE:
                return refs

    return await run_transaction(store, listing, read_only=True)


async def _refuse_live(settings: Settings, targets: list[SessionRef]) -> None:
    """SessionStateError (exit code 4) if any target's workflow is running (workflow ids
    name the state namespace, see ``workflow_id_for``)."""
    if not targets:
        return
    try:
        client = await settings.temporal()
    except UnreachableError as exc:
        raise UnreachableError(
            f"{exc.message}. Import asks Temporal whether a running workflow owns the target;"
            " pass --no-live-check only if no worker uses this database"
        ) from exc
    wanted = {workflow_id_for(t.agent_id, t.session_id, t.namespace): t for t in targets}
    if len(wanted) == 1:
        from temporalio.client import WorkflowExecutionStatus
        from temporalio.service import RPCError, RPCStatusCode

        (workflow_id,) = wanted
        try:
            described = await client.get_workflow_handle(workflow_id).describe()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return
        live = [workflow_id] if described.status == WorkflowExecutionStatus.RUNNING else []
    else:
        query = f"WorkflowType = '{WORKFLOW_TYPE}' AND ExecutionStatus = 'Running'"
        live = [w.id async for w in client.list_workflows(query) if w.id in wanted]
    if live:
        names = ", ".join(f"{wanted[w].agent_id}/{wanted[w].session_id}" for w in sorted(live))
        raise SessionStateError(
            f"session {names} has a running workflow that reads and writes this state; "
            "close it first (statecore close AGENT SESSION) or import under another id "
            "with --as"
        )
