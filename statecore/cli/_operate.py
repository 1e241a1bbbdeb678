"""Operating one session through its workflow: describe, reset, compact, and the operator
signals pause, resume, hint, migrate and close (docs/operators.md).

Reports come from the session's workflow, so its worker must be running. ``describe --db``
reads the database instead, for sessions whose workflow is closed or has no worker.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from statecore.cli._args import add_session_arguments, identifier, new_command, positive_int
from statecore.cli._args import store_names as parse_store_names
from statecore.cli._no_worker import answer_or_no_worker
from statecore.cli._output import jsonable, print_json, print_note, print_report, stdout
from statecore.cli._settings import Settings
from statecore.contract._session import AddHintInput, CompactInput, PauseInput, ResetInput
from statecore.core._errors import ResetRefusedError, SessionClosedError, SessionNotFoundError
from statecore.core._models import SessionRef, StateOperationResult

if TYPE_CHECKING:
    from statecore.temporal._client import AgentSessionClient

T = TypeVar("T")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = new_command(commands, "describe", "show a session's stores and checkpoint")
    add_session_arguments(p)
    p.add_argument("--data", action="store_true", help="include the stored data")
    p.add_argument(
        "--db",
        action="store_true",
        help="read the database directly (no workflow or worker needed; no checkpoint)",
    )
    p.set_defaults(run=describe)

    p = new_command(
        commands, "reset", "clear stores of a session (all stores by default; asks first)"
    )
    add_session_arguments(p)
    p.add_argument(
        "--stores",
        nargs="+",
        metavar="STORE",
        help="only these stores (space or comma separated): conversation kv state flow "
        "orchestration tools task",
    )
    p.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="do not ask for confirmation (needed when stdin is not a terminal)",
    )
    p.set_defaults(run=reset)

    p = new_command(commands, "compact", "move a session's context window (never deletes)")
    add_session_arguments(p)
    p.add_argument("--strategy", choices=("recent", "tokens", "summarize"), default="tokens")
    p.add_argument("--max-tokens", type=positive_int, metavar="N")
    p.add_argument("--max-messages", type=positive_int, metavar="N")
    p.set_defaults(run=compact)

    p = new_command(commands, "pause", "park a session at its next turn boundary")
    add_session_arguments(p)
    p.add_argument("--reason", default="paused by operator")
    p.set_defaults(run=send_signal, signal="pause")

    p = new_command(commands, "resume", "let a paused session take turns again")
    add_session_arguments(p)
    p.set_defaults(run=send_signal, signal="resume")

    p = new_command(commands, "hint", "add a hint to a session's context")
    add_session_arguments(p)
    p.add_argument("text", metavar="TEXT")
    p.set_defaults(run=send_signal, signal="add_hint")

    # Here --task-queue is where the session goes, not the global default queue.
    p = new_command(
        commands, "migrate", "move a session to another task queue", skip=("--task-queue",)
    )
    add_session_arguments(p)
    p.add_argument(
        "--task-queue", dest="target_queue", type=identifier, required=True, metavar="QUEUE"
    )
    p.set_defaults(run=send_signal, signal="migrate")

    p = new_command(commands, "close", "close a session (its state is kept unless asked)")
    add_session_arguments(p)
    p.add_argument("--delete-state", action="store_true", help="also delete its SQL state")
    p.set_defaults(run=send_signal, signal="close")


async def describe(args: argparse.Namespace, settings: Settings) -> int:
    if args.db:
        return await _describe_from_database(args, settings)
    sessions = await settings.sessions()
    report = await _on_workflow(
        sessions,
        args,
        settings.answer(
            sessions.describe(args.agent, args.session, include_data=args.data), "describe"
        ),
    )
    # A turn that waits on a failing model call: its attempt, error and next attempt, from
    # Temporal's record of the pending call (the report itself holds committed state only).
    waiting = await sessions.waiting_on(args.agent, args.session)
    if settings.json:
        print_json({**jsonable(report), "waiting_on": waiting} if waiting else report)
    else:
        print_report(report, title=f"{args.agent}/{args.session}")
        if waiting:
            stdout().print(f"waiting on: {waiting}", markup=False)
        if args.data:
            print_store_data(report)
    return 0


async def _describe_from_database(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.operations._control_plane import describe as describe_stored

    ref = SessionRef(namespace=settings.tenant, agent_id=args.agent, session_id=args.session)
    async with settings.store() as store:
        report = await describe_stored(store, ref, include_data=args.data)
    if not any(s.exists for s in report.stores):
        raise SessionNotFoundError(f"the database holds no state for session {ref}")
    if settings.json:
        print_json(report)
    else:
        print_report(report, title=f"{ref} (from the database)")
        if args.data:
            print_store_data(report)
    return 0


def print_store_data(report: StateOperationResult) -> None:
    """``describe --data`` for people: each store's data as indented JSON under its name
    (the table above has the counters only)."""
    out = stdout()
    for store in report.stores:
        if store.data in (None, [], {}):
            continue
        truncated = " (truncated: more is stored)" if store.metadata.get("data_truncated") else ""
        out.print(f"\n{store.name} data{truncated}:", markup=False)
        out.print(json.dumps(store.data, indent=2, ensure_ascii=False), markup=False)


async def reset(args: argparse.Namespace, settings: Settings) -> int:
    names = parse_store_names(args.stores) if args.stores else []
    # The workflow's own validation, before anything is sent.
    ResetInput(stores=names, all=not names)
    what = ", ".join(names) if names else "every store"
    if not args.yes:
        _confirm(f"delete {what} of session {args.agent}/{args.session}?")
    sessions = await settings.sessions()
    request = sessions.reset(args.agent, args.session, names or None, all_stores=not names)
    report = await _on_workflow(sessions, args, settings.answer(request, "reset"))
    if settings.json:
        print_json(report)
    else:
        print_report(report, title=f"reset {args.agent}/{args.session}: {what}")
    return 0


def _confirm(question: str) -> None:
    """Ask on the terminal; anything but yes refuses (ResetRefused, exit code 4). Without a
    terminal there is no one to ask: ``--yes`` says it instead."""
    if not sys.stdin.isatty():
        raise ResetRefusedError(
            f"reset not confirmed: {question} Pass --yes to confirm without a terminal"
        )
    print_note(f"{question} This cannot be undone. [y/N]")
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise ResetRefusedError("reset not confirmed; nothing was cleared")


async def compact(args: argparse.Namespace, settings: Settings) -> int:
    request = {"strategy": args.strategy}
    if args.max_tokens is not None:
        request["max_tokens"] = args.max_tokens
    if args.max_messages is not None:
        request["max_messages"] = args.max_messages
    CompactInput(**request)  # type: ignore[arg-type]
    sessions = await settings.sessions()
    report = await _on_workflow(
        sessions,
        args,
        settings.answer(sessions.compact(args.agent, args.session, **request), "compact"),
    )
    if settings.json:
        print_json(report)
    else:
        print_report(report, title=f"compacted {args.agent}/{args.session} ({args.strategy})")
    return 0


#: The operator signals, each as the client call that sends it.
SIGNALS: dict[str, Callable[[AgentSessionClient, argparse.Namespace], Awaitable[None]]] = {
    "pause": lambda sessions, a: sessions.pause(a.agent, a.session, a.reason),
    "resume": lambda sessions, a: sessions.resume(a.agent, a.session),
    "add_hint": lambda sessions, a: sessions.add_hint(a.agent, a.session, a.text),
    "migrate": lambda sessions, a: sessions.migrate(a.agent, a.session, a.target_queue),
    "close": lambda sessions, a: sessions.close(a.agent, a.session, delete_state=a.delete_state),
}


async def send_signal(args: argparse.Namespace, settings: Settings) -> int:
    """Send the operator signal ``args.signal``; returns once Temporal accepted it (the
    workflow applies it at its next step, and ``describe`` shows the result)."""
    # Bad input fails here, before a connection is made (exit code 2).
    if args.signal == "pause":
        PauseInput(reason=args.reason)
    elif args.signal == "add_hint":
        AddHintInput(text=args.text)
    sessions = await settings.sessions()
    await _on_workflow(sessions, args, SIGNALS[args.signal](sessions, args))
    agent, session = args.agent, args.session
    if settings.json:
        print_json(
            {
                "signal": args.signal,
                "sent": True,
                "agent_id": agent,
                "session_id": session,
                "workflow_id": sessions.workflow_id(agent, session),
            }
        )
    else:
        stdout().print(f"sent {args.signal} to {agent}/{session}", markup=False)
    return 0


async def _on_workflow(
    sessions: AgentSessionClient, args: argparse.Namespace, work: Awaitable[T]
) -> T:
    """Run ``work`` against the session's workflow, telling a closed session (exit code 4:
    a new message reopens it) from one that never existed (exit code 3), and a session no
    worker serves (exit code 5, within a few seconds) from one that is slow to answer."""
    try:
        return await answer_or_no_worker(sessions, args.agent, args.session, work)
    except SessionNotFoundError as exc:
        if await _has_workflow(sessions, args.agent, args.session):
            raise SessionClosedError(
                f"session {args.agent}/{args.session} is closed; its state stays in SQL and "
                "a new message (statecore chat) reopens it"
            ) from exc
        raise SessionNotFoundError(
            f"no session {args.agent}/{args.session}: Temporal has no workflow "
            f"{sessions.workflow_id(args.agent, args.session)}"
        ) from exc


async def _has_workflow(sessions: AgentSessionClient, agent: str, session: str) -> bool:
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await sessions.handle(agent, session).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True
