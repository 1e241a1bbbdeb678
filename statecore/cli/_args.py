"""Argument types shared by the ``statecore`` commands: bad values fail at parse time with
one line that says what is allowed (exit code 2)."""

from __future__ import annotations

import argparse

from statecore.core._errors import InvalidInputError
from statecore.core._models import ALL_STORES, validate_identifier


def identifier(value: str) -> str:
    """An agent, session, namespace or task-queue id."""
    try:
        return validate_identifier(value, "id")
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(exc.message) from exc


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return number


def positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"{value} must be more than 0")
    return number


def store_names(values: list[str]) -> list[str]:
    """``--stores conversation kv`` and ``--stores conversation,kv`` alike; unknown names
    are a usage error before anything is sent."""
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in ALL_STORES]
    if unknown:
        raise InvalidInputError(
            f"unknown store(s) {', '.join(unknown)}; the stores are {', '.join(ALL_STORES)}"
        )
    return names


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", type=identifier, metavar="AGENT", help="agent id")
    parser.add_argument("session", type=identifier, metavar="SESSION", help="session id")


def new_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    *,
    skip: tuple[str, ...] = (),
    description: str | None = None,
) -> argparse.ArgumentParser:
    """A command's parser, taking the global options too (see ``add_global_options``)."""
    from statecore.cli._exits import EXIT_CODES_HELP
    from statecore.cli._settings import add_global_options

    parser = commands.add_parser(
        name,
        help=summary,
        description=description or summary,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_global_options(parser, with_defaults=False, skip=skip)
    return parser
