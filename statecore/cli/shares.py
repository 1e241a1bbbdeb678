"""``statecore shares list`` and ``statecore shares revoke``: the grants of a namespace.

Operators see who shared what with which access, who redeemed it, and revoke a grant by its
share id (the token itself is never stored, so it cannot be shown).
"""

from __future__ import annotations

import argparse
from typing import Any

from statecore.cli.args import identifier, new_command
from statecore.cli.output import print_json, print_rows, stdout
from statecore.cli.settings import Settings


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = new_command(commands, "shares", "list and revoke share tokens of a namespace")
    sub = group.add_subparsers(dest="shares_command", metavar="COMMAND", required=True)
    p = new_command(sub, "list", "grants of the namespace, with their redemptions")
    p.add_argument("--agent", type=identifier, help="only grants of this owner agent")
    p.set_defaults(run=list_shares)
    p = new_command(sub, "revoke", "revoke a grant: its token is refused from now on")
    p.add_argument("share_id", metavar="SHARE_ID", help="the share id (from `shares list`)")
    p.set_defaults(run=revoke_share)


async def list_shares(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.core.share_listing import namespace_grants, redemptions
    from statecore.store import StoreTransaction, run_transaction

    async def read(tx: StoreTransaction) -> list[dict[str, Any]]:
        rows = []
        for grant in await namespace_grants(tx, settings.tenant):
            if args.agent is not None and grant.owner_agent != args.agent:
                continue
            row = grant.model_dump(mode="json", exclude={"token_sha256", "epoch"})
            row["redemptions"] = [
                r.model_dump(mode="json")
                for r in await redemptions(tx, settings.tenant, grant.share_id)
            ]
            rows.append(row)
        return rows

    async with settings.store() as store:
        rows = await run_transaction(store, read, read_only=True)
    if settings.json:
        print_json(rows)
        return 0
    for row in rows:
        row["owner"] = f"{row['owner_agent']}/{row['owner_session']}"
        row["what"] = row["kind"] if row["bucket"] is None else f"kv:{row['bucket']}"
        row["used_by"] = len(row["redemptions"])
        row["revoked"] = row["revoked_at"] or ""
    print_rows(
        rows,
        ["share_id", "owner", "what", "access", "expires_at", "revoked", "used_by"],
        empty=f"no shares in namespace {settings.tenant}",
    )
    return 0


async def revoke_share(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.core.shares import revoke
    from statecore.store import run_transaction

    async with settings.store() as store:
        grant = await run_transaction(
            store, lambda tx: revoke(tx, settings.tenant, args.share_id)
        )
    if settings.json:
        print_json(grant.model_dump(mode="json", exclude={"token_sha256", "epoch"}))
    else:
        when = grant.revoked_at.isoformat() if grant.revoked_at else "?"
        stdout().print(f"share {grant.share_id} revoked ({grant.revoked_by}, {when})", markup=False)
    return 0
