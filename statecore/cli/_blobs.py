"""``statecore blobs usage`` and ``statecore blobs sweep``: payloads stored by reference.

``usage`` reads the database only. ``sweep`` also asks Temporal which workflows still have a
history, since a blob may be deleted only when none that referenced it does (the rule is in
docs/large_values.md, "Retention")."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from statecore.cli._args import new_command
from statecore.cli._exits import UnreachableError
from statecore.cli._output import print_json, print_rows, stdout
from statecore.cli._settings import Settings
from statecore.core._limits import BLOB_SWEEP_GRACE_SECONDS


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = new_command(commands, "blobs", "large payloads stored in statecore's database")
    sub = group.add_subparsers(dest="blobs_command", metavar="COMMAND", required=True)
    p = new_command(
        sub, "usage", "blobs and bytes per session (workflow) that stored them; no Temporal"
    )
    p.add_argument("--limit", type=int, default=50, help="show at most this many (default 50)")
    p.set_defaults(run=usage)

    p = new_command(
        sub,
        "sweep",
        "delete blobs that no workflow history (open, or closed within the namespace's "
        "retention) can reference any more",
    )
    p.add_argument(
        "--grace-seconds",
        type=float,
        default=float(BLOB_SWEEP_GRACE_SECONDS),
        help="leave blobs stored this recently alone (default %(default)g)",
    )
    p.add_argument("--dry-run", action="store_true", help="report, delete nothing")
    p.set_defaults(run=sweep)


def _table(settings: Settings) -> Any:
    from statecore.store import normalize_database_url
    from statecore.store.sql._blobs import BlobTable

    path = settings.sqlite_path()
    if path is not None and not path.exists():
        raise UnreachableError(
            f"no SQLite database at {path}; pass --database-url, or create it with "
            "`statecore db upgrade`"
        )
    return BlobTable.open(normalize_database_url(settings.database_url))


async def usage(args: argparse.Namespace, settings: Settings) -> int:
    table = _table(settings)
    try:
        rows = await table.usage()
        count, size, stored = await table.totals()
    finally:
        await table.close()
    shown = [
        {
            "kind": u.target.kind,
            "namespace": u.target.namespace,
            "workflow_id": u.target.target_id,
            "run_id": u.target.run_id,
            "blobs": u.blobs,
            "bytes": u.size,
            "stored_bytes": u.stored_size,
            "last_stored_at": u.last_stored_at.isoformat(),
        }
        for u in rows[: max(args.limit, 0)]
    ]
    if settings.json:
        print_json({"blobs": count, "bytes": size, "stored_bytes": stored, "targets": shown})
        return 0
    print_rows(
        shown,
        ["workflow_id", "run_id", "blobs", "bytes", "stored_bytes", "last_stored_at"],
        empty="no blobs referenced",
    )
    stdout().print(f"total: {count} blobs, {size:,} bytes ({stored:,} stored)", markup=False)
    return 0


async def sweep(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.temporal._blob_driver import sweep_blobs

    client = await settings.temporal()
    table = _table(settings)
    try:
        report = await sweep_blobs(
            client, table, grace_seconds=args.grace_seconds, dry_run=args.dry_run
        )
    finally:
        await table.close()
    if settings.json:
        print_json({**asdict(report), "dry_run": args.dry_run})
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    stdout().print(
        f"workflows checked: {report.checked}, without history: {report.gone}, "
        f"left alone: {report.skipped}; {verb} {report.references_deleted} references, "
        f"{report.blobs_deleted} blobs ({report.bytes_freed:,} bytes)",
        markup=False,
    )
    return 0
