"""The ``statecore`` parser and ``main``: parse, run one command, map its outcome to an exit
code. Commands live one group per module; each registers its parsers and a ``run``."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import traceback
from typing import ClassVar, NoReturn

from statecore.cli import _blobs as blobs
from statecore.cli import _bundles as bundles
from statecore.cli import _chat as chat
from statecore.cli import _database as database
from statecore.cli import _dev as dev
from statecore.cli import _events as events
from statecore.cli import _listing as listing
from statecore.cli import _operate as operate
from statecore.cli import _shares as shares
from statecore.cli import _worker as worker
from statecore.cli._closed_pipe import is_closed_pipe, silence_stdout
from statecore.cli._exits import (
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    error_code_for,
    error_message,
    exit_code_for,
)
from statecore.cli._output import print_error
from statecore.cli._settings import Settings, add_global_options
from statecore.temporal._environment import Environment

DESCRIPTION = """\
Operate statecore sessions: durable state for long-running AI agents on Temporal.

  statecore dev                                   # dev server + Web UI + worker, SQLite
  statecore worker --profile prod                 # a worker on a cluster (temporal.toml)
  statecore chat support-bot alice                # talk to a session (one turn per line)
  statecore sessions list --status paused --json
  statecore export support-bot alice -o alice.bundle.json
  statecore --database-url postgresql://app@db/agents import alice.bundle.json
  statecore blobs usage                           # large payloads stored by reference

Global options may come before or after the command; options after it win.
"""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit code 2 (never a traceback)."""

    #: Set by ``main`` before parsing: whether the command line asked for JSON output.
    json_errors: ClassVar[bool] = False

    def error(self, message: str) -> NoReturn:
        hint = f"{message} (see `{self.prog} --help`)"
        print_error("Usage", hint, EXIT_USAGE, as_json=Parser.json_errors)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> Parser:
    parser = Parser(
        prog="statecore",
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_global_options(parser, with_defaults=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (dev, worker, chat, listing, operate, bundles, database, shares, events, blobs):
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The console script: run one command (``argv`` defaults to the command line) and
    return its exit code (see EXIT_CODES_HELP).

    Run as the ``statecore`` program (``argv`` None), the process ends with ``os._exit``
    once output is flushed: Temporal's native client threads can abort interpreter teardown
    at random (temporalio/sdk-python#300), which would turn a finished command into exit
    code 134."""
    code = run_command(sys.argv[1:] if argv is None else argv)
    if argv is None:
        exit_process(code)
    return code


def exit_process(code: int) -> NoReturn:
    """End the process with ``code`` once output is flushed (see ``main``)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError as exc:  # the reader went away (statecore.cli._closed_pipe)
            if not is_closed_pipe(exc):
                raise
    os._exit(code)


def run_command(argv: list[str]) -> int:
    Parser.json_errors = "--json" in argv
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_args(args, Environment.from_process())
        return asyncio.run(args.run(args, settings))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # every failure becomes one line and a documented exit code
        if is_closed_pipe(exc):
            silence_stdout()
            return EXIT_OK
        code = exit_code_for(exc)
        if args.debug:
            traceback.print_exc()
        print_error(error_code_for(exc), error_message(exc), code, as_json=args.json)
        return code
