"""``statecore chat AGENT SESSION``: a conversation with a durable session.

Each line read from stdin is one turn. The line gets its turn id before the first attempt
and keeps it through every retry, so a turn whose worker died mid-call, or whose session was
moving to a new run, is retried safely: it commits once and its reply is returned once.
The session opens on the first line (or reopens from SQL if it was closed).

On a terminal the reply is printed as it is generated, read from the sessions' database
(``--database-url``): ``--no-stream`` waits for the whole reply instead, ``--stream`` streams
into a pipe too. With ``--json`` a streamed turn is one JSON line per event (``text``,
``tool_call``, ``restarted``, then ``final``, which carries the turn's result fields); an
unstreamed one is the result's line alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import shlex
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console
from rich.status import Status

from statecore.cli._args import add_session_arguments, new_command, positive_float, positive_int
from statecore.cli._output import print_json, stderr, stdout
from statecore.cli._settings import Settings
from statecore.contract._streams import (
    FinalEvent,
    RestartedEvent,
    TextEvent,
    ToolCallEvent,
    TurnEvent,
)
from statecore.core._errors import InvalidInputError, SessionStateError, StatecoreError
from statecore.core._models import validate_turn_id

if TYPE_CHECKING:
    from statecore.temporal._client import AgentSessionClient

T = TypeVar("T")

#: Lines that end an interactive chat (end of input does too).
QUIT = {"/quit", "/exit"}
DEFAULT_RETRY_SECONDS = 300.0
#: A line unanswered this long gets a status line saying it is waiting.
SHOW_WAITING_AFTER_SECONDS = 2.0
#: How long the status line waits for Temporal to say what the turn waits on.
PROBE_SECONDS = 5.0


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
    p.add_argument(
        "--turn-id",
        type=turn_id_argument,
        metavar="ID",
        help="the first turn's id (to resend a turn that was not answered: it commits once)",
    )
    p.add_argument(
        "--resend",
        metavar="TEXT",
        help="send TEXT as the first turn, before reading stdin (with --turn-id: a resend)",
    )
    p.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print the reply as it is generated, read from the database (default: on a "
        "terminal; --no-stream waits for the whole reply)",
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
    if not settings.debug:
        # The status line says the line is waiting; the SDK's own retry warnings would
        # repeat it a screen at a time.
        logging.getLogger("temporalio.core").setLevel(logging.ERROR)
    sessions = await settings.sessions(retry_for=timedelta(seconds=args.retry_for))
    options = session_options(args)
    interactive = sys.stdin.isatty()
    if interactive and not settings.json:
        stderr().print(f"chat with {args.agent}/{args.session}; /quit or Ctrl-D ends it")
    first_turn_id: str | None = args.turn_id
    resend: str | None = args.resend
    streaming = args.stream if args.stream is not None else sys.stdout.isatty()
    async with contextlib.AsyncExitStack() as stack:
        if streaming:
            try:
                sessions.store = await stack.enter_async_context(settings.store())
            except StatecoreError as exc:
                if args.stream:
                    raise  # asked for by name: say why it cannot be done
                stderr().print(
                    f"not streaming: the database cannot be read ({exc.message}); "
                    "replies are printed whole",
                    markup=False,
                )
                streaming = False
        return await _converse(
            args, settings, sessions, options, interactive, streaming, first_turn_id, resend
        )


async def _converse(
    args: argparse.Namespace,
    settings: Settings,
    sessions: AgentSessionClient,
    options: dict[str, Any],
    interactive: bool,
    streaming: bool,
    first_turn_id: str | None,
    resend: str | None,
) -> int:
    out = stdout()
    while True:
        if resend is not None:
            content, resend = resend, None
        else:
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
        turn_id, first_turn_id = first_turn_id or f"cli-{uuid.uuid4().hex}", None
        waiting = WaitingLine(
            stderr(),
            turn_id,
            resend_command(args, content, turn_id),
            probe=functools.partial(sessions.waiting_on, args.agent, args.session),
        )
        try:
            if streaming:
                await waiting.around(
                    print_stream(
                        sessions.stream(
                            args.agent, args.session, content, turn_id=turn_id, **options
                        ),
                        as_json=settings.json,
                    )
                )
                continue
            # send() retries transient failures (Temporal restarting included) with this same
            # turn id until --retry-for runs out (module docstring).
            result = await waiting.around(
                sessions.send(
                    args.agent,
                    args.session,
                    content,
                    turn_id=turn_id,
                    on_retry=waiting.retrying,
                    **options,
                )
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


async def print_stream(events: AsyncIterator[TurnEvent], *, as_json: bool) -> None:
    """Print a streamed turn's events as they come: the text as it grows (a restart starts
    the reply again on a new line, saying so on stderr), or one JSON line per event."""
    async for event in events:
        if as_json:
            if isinstance(event, FinalEvent):
                print_json({"type": "final", **event.result.model_dump(mode="json")}, compact=True)
            else:
                print_json(event.model_dump(mode="json"), compact=True)
            continue
        if isinstance(event, TextEvent):
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, RestartedEvent):
            sys.stdout.write("\n")
            sys.stdout.flush()
            stderr().print(
                "[the turn restarted (its worker or model call failed); the reply again:]",
                markup=False,
            )
        elif isinstance(event, ToolCallEvent):
            stderr().print(f"[tool call {event.call.name} {event.call.arguments}]", markup=False)
        elif isinstance(event, FinalEvent):
            sys.stdout.write("\n")
            sys.stdout.flush()


def turn_id_argument(value: str) -> str:
    """A ``--turn-id``: what ``send`` accepts as a turn id."""
    try:
        return validate_turn_id(value)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(exc.message) from exc


def resend_command(args: argparse.Namespace, content: str, turn_id: str) -> str:
    """The ``statecore chat`` command line that sends ``content`` again as ``turn_id``."""
    return shlex.join(
        ["statecore", "chat", args.agent, args.session, "--turn-id", turn_id, "--resend", content]
    )


class WaitingLine:
    """One status line on stderr while a typed line waits for its answer.

    It appears once the answer takes longer than SHOW_WAITING_AFTER_SECONDS and says why
    (Temporal unreachable, the session busy, the model call's latest failed attempt, asked
    of Temporal through ``probe`` each time the line is redrawn). On a terminal it is one
    line redrawn in place; in a pipe a line is written only when the reason changes, never
    once per retry."""

    def __init__(
        self,
        console: Console,
        turn_id: str,
        resend: str = "",
        probe: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self.console = console
        self.turn_id = turn_id
        #: The command that sends the same line with the same turn id again.
        self.resend = resend
        self.probe = probe
        self.reason = "no answer yet"
        self.seconds_left: float | None = None
        self._status: Status | None = None
        self._written: str | None = None

    def retrying(self, reason: str, seconds_left: float) -> None:
        self.reason = reason
        self.seconds_left = seconds_left
        self._show()

    async def around(self, sending: Awaitable[T]) -> T:
        task = asyncio.ensure_future(sending)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=SHOW_WAITING_AFTER_SECONDS)
                if done:
                    return task.result()
                await self._ask_probe()
                self._show()
        except asyncio.CancelledError:
            task.cancel()
            self._end()
            self.console.print(
                f"gave up waiting for turn {self.turn_id}; it may still be answered. Sending "
                "the same turn id again is safe (it commits once, and an answered turn "
                f"returns its reply): {self.resend}",
                markup=False,
            )
            raise
        finally:
            self._end()

    async def _ask_probe(self) -> None:
        if self.probe is None:
            return
        try:
            reason = await asyncio.wait_for(self.probe(), PROBE_SECONDS)
        except TimeoutError:
            return  # Temporal is slow to describe the session; the line keeps its reason
        if reason:
            self.reason = reason

    def _text(self, *, live: bool) -> str:
        left = (
            f"; retrying for {self.seconds_left:.0f} s more"
            if live and self.seconds_left is not None
            else ""
        )
        # In a pipe a line is written when the reason changes: a countdown to the model
        # call's next attempt would change it at every redraw.
        reason = self.reason if live else self.reason.split("; next attempt in ")[0]
        return f"waiting for the answer: {reason}{left} (Ctrl-C gives up)"

    def _show(self) -> None:
        if self.console.is_terminal:
            if self._status is None:
                self._status = self.console.status(self._text(live=True))
                self._status.start()
            else:
                self._status.update(self._text(live=True))
            return
        text = self._text(live=False)
        if text != self._written:
            self.console.print(text, markup=False)
            self._written = text

    def _end(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
