"""``statecore chat AGENT SESSION``: a conversation with a durable session.

Each line read from stdin is one turn. The line gets its turn id before the first attempt
and keeps it through every retry, so a turn whose worker died mid-call, or whose session was
moving to a new run, is retried safely: it commits once and its reply is returned once.
The session opens on the first line (or reopens from SQL if it was closed).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from datetime import timedelta
from typing import Any

from statecore.cli.args import add_session_arguments, new_command, positive_float, positive_int
from statecore.cli.output import print_json, stderr, stdout
from statecore.cli.settings import Settings
from statecore.core.errors import InvalidInputError, SessionStateError

#: Lines that end an interactive chat (end of input does too).
QUIT = {"/quit", "/exit"}
DEFAULT_RETRY_SECONDS = 300.0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = new_command(
        commands,
        "chat",
        "talk with a session: one turn per line of stdin",
        description=__doc__,
    )
    add_session_arguments(p)
    p.add_argument(
        "--retry-for",
        type=positive_float,
        default=DEFAULT_RETRY_SECONDS,
        metavar="SECONDS",
        help="keep retrying a turn this long while the session cannot answer (default 300)",
    )
    opening = p.add_argument_group("when the session opens (ignored if it is already running)")
    opening.add_argument("--system-prompt", metavar="TEXT")
    opening.add_argument("--ttl-seconds", type=positive_int, metavar="N", help="idle TTL")
    opening.add_argument(
        "--model-heartbeat-seconds",
        type=positive_float,
        metavar="SECONDS",
        help="how soon a dead worker's model call is retried elsewhere (default 30)",
    )
    p.set_defaults(run=chat)


def session_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.system_prompt is not None:
        options["system_prompt"] = args.system_prompt
    if args.ttl_seconds is not None:
        options["ttl_seconds"] = args.ttl_seconds
    if args.model_heartbeat_seconds is not None:
        options["model_heartbeat_seconds"] = args.model_heartbeat_seconds
    return options


async def chat(args: argparse.Namespace, settings: Settings) -> int:
    sessions = await settings.sessions(retry_for=timedelta(seconds=args.retry_for))
    options = session_options(args)
    interactive = sys.stdin.isatty()
    out = stdout()
    if interactive and not settings.json:
        stderr().print(f"chat with {args.agent}/{args.session}; /quit or Ctrl-D ends it")
    while True:
        if interactive:
            stderr().print("you> ", end="")
        # A blocking read belongs in a thread: the event loop keeps serving the connection.
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            return 0
        content = line.rstrip("\r\n")
        if content.strip() in QUIT:
            return 0
        if not content.strip():
            continue
        turn_id = f"cli-{uuid.uuid4().hex}"
        try:
            # send() retries transient failures with this same turn id (module docstring).
            result = await sessions.send(
                args.agent, args.session, content, turn_id=turn_id, **options
            )
        except (InvalidInputError, SessionStateError) as exc:
            if not interactive:
                raise  # a script learns of it through the exit code
            # A person can fix the line, or resume the session from another terminal.
            stderr().print(f"refused: {exc.message}", markup=False)
            continue
        if settings.json:
            print_json(result, compact=True)
        else:
            out.print(result.reply.content, markup=False)
