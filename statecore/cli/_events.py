"""``statecore events``: read or follow a namespace's change feed; ``statecore events sweep``.

With ``--json`` each event is one line of JSON on stdout (JSON lines) and nothing else is
written there, so the output can be piped into another program as it arrives.
"""

from __future__ import annotations

import argparse
from datetime import timedelta

from statecore.cli._args import new_command, positive_float, positive_int
from statecore.cli._output import print_json, stdout
from statecore.cli._settings import Settings


def _position(value: str) -> int:
    if value == "0":
        return 0
    return positive_int(value)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = new_command(
        commands,
        "events",
        "print the namespace's committed changes (ids and sizes), optionally following it",
    )
    p.add_argument(
        "--after", type=_position, default=0, help="start after this event number (default 0)"
    )
    p.add_argument("--follow", action="store_true", help="keep waiting for new events")
    p.add_argument(
        "--poll-interval",
        type=positive_float,
        default=1.0,
        help="seconds between reads on SQLite and MariaDB (PostgreSQL is pushed; default 1)",
    )
    p.add_argument(
        "--idle-timeout",
        type=positive_float,
        default=None,
        help="with --follow: stop after this many seconds without a new event",
    )
    p.set_defaults(run=show_events)
    sub = p.add_subparsers(dest="events_command", metavar="COMMAND", required=False)
    s = new_command(sub, "sweep", "delete old events by age and/or count (numbers never reused)")
    s.add_argument("--older-than", type=positive_float, help="seconds: delete older events")
    s.add_argument("--keep", type=positive_int, help="keep only the newest N per namespace")
    s.add_argument(
        "--all-namespaces", action="store_true", help="every namespace, not only this one"
    )
    s.set_defaults(run=sweep_events)


async def show_events(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.store._feed import follow_events, read_events

    async with settings.store() as store:
        if args.follow:
            stream = follow_events(
                store,
                settings.tenant,
                after=args.after,
                poll_interval=args.poll_interval,
                idle_timeout=args.idle_timeout,
            )
            async for event in stream:
                _print(event, settings)
            return 0
        after = args.after
        while True:
            page = await read_events(store, settings.tenant, after=after)
            for event in page:
                _print(event, settings)
                after = event.seq
            if not page:
                return 0


def _print(event: object, settings: Settings) -> None:
    from statecore.core._change_events import ChangeEvent

    assert isinstance(event, ChangeEvent)
    if settings.json:
        print_json(event, compact=True)
        return
    who = f"{event.agent_id}/{event.session_id}" if event.session_id else "(namespace)"
    turn = f" turn {event.turn_id}" if event.turn_id else ""
    stdout().print(
        f"{event.seq:>8} {event.created_at.isoformat()} {event.kind:<13} {who}{turn} "
        f"{event.detail}",
        markup=False,
    )


async def sweep_events(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.core._errors import InvalidInputError
    from statecore.store import StoreTransaction, run_transaction

    if args.older_than is None and args.keep is None:
        raise InvalidInputError("say what to sweep: --older-than SECONDS and/or --keep N")
    async with settings.store() as store:

        async def work(tx: StoreTransaction) -> int:
            older = None if args.older_than is None else tx.now - timedelta(seconds=args.older_than)
            namespace = None if args.all_namespaces else settings.tenant
            return await tx.events.sweep(older_than=older, keep_last=args.keep, namespace=namespace)

        removed = await run_transaction(store, work)
    if settings.json:
        print_json({"removed": removed})
    else:
        stdout().print(f"events removed: {removed}", markup=False)
    return 0
