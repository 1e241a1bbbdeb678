"""``statecore db upgrade`` and ``statecore sweep``: work on the database itself, no Temporal."""

from __future__ import annotations

import argparse

from statecore.cli._args import new_command
from statecore.cli._output import print_json, print_rows, stdout
from statecore.cli._settings import Settings


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = new_command(commands, "db", "manage statecore's database schema")
    sub = group.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    p = new_command(
        sub,
        "upgrade",
        "create or upgrade the schema (Alembic); safe to run again",
    )
    p.add_argument("--revision", default="head", help="target revision (default head)")
    p.set_defaults(run=upgrade)

    p = new_command(
        commands,
        "sweep",
        "delete sessions idle past their TTL (with all they own) and expired KV keys",
    )
    p.set_defaults(run=sweep)


def redact(url: str) -> str:
    """A database URL fit for output: the password hidden."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


async def upgrade(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.store import normalize_database_url
    from statecore.store._migrate import current_revision, upgrade_database

    url = normalize_database_url(settings.database_url)
    path = settings.sqlite_path()
    if path is not None:
        # A first upgrade creates the database, as the worker does on its first start.
        path.parent.mkdir(parents=True, exist_ok=True)
    previous = await current_revision(url)
    revision = await upgrade_database(url, args.revision)
    if settings.json:
        print_json({"database": redact(url), "previous": previous, "revision": revision})
    else:
        change = "already at" if previous == revision else f"{previous or 'empty'} ->"
        stdout().print(f"{redact(url)}: {change} revision {revision}", markup=False)
    return 0


async def sweep(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.operations._control_plane import sweep as sweep_store

    async with settings.store() as store:
        report = await sweep_store(store)
    if settings.json:
        print_json(report)
        return 0
    print_rows(
        [ref.model_dump() for ref in report.sessions],
        ["namespace", "agent_id", "session_id"],
        empty="no expired sessions",
    )
    stdout().print(f"expired KV keys removed: {report.kv_keys}", markup=False)
    return 0
