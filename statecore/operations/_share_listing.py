"""What operators see of share tokens: the grants of an owner or a namespace, and who
redeemed each (``describe``, ``statecore shares list``). Reads only; see
``statecore.operations._shares`` for how grants are stored and checked."""

from __future__ import annotations

from pydantic import JsonValue

from statecore.contract._shares import ShareGrant, ShareKind, ShareRedemption
from statecore.core._limits import MAX_PAGE_SIZE
from statecore.core._models import SessionRef
from statecore.operations._shares import (
    GRANT_BUCKET,
    OWNER_BUCKET,
    USE_BUCKET,
    current_epoch,
    load_grant,
    namespace_scope,
    owner_prefix,
)
from statecore.store._base import StoreTransaction


async def owner_grants(tx: StoreTransaction, owner: SessionRef) -> list[ShareGrant]:
    """The grants ``owner`` made, newest last (describe)."""
    scope = namespace_scope(owner.namespace)
    grants: list[ShareGrant] = []
    after: str | None = None
    prefix = owner_prefix(owner)
    while True:
        page = await tx.kv.list_keys(scope, OWNER_BUCKET, prefix, limit=MAX_PAGE_SIZE, after=after)
        for key in page.keys:
            grant = await load_grant(tx, owner.namespace, key[len(prefix) :])
            if grant is not None:
                grants.append(grant)
        if page.next_after is None:
            break
        after = page.next_after
    return sorted(grants, key=lambda g: g.created_at)


async def redemptions(tx: StoreTransaction, namespace: str, share_id: str) -> list[ShareRedemption]:
    scope = namespace_scope(namespace)
    page = await tx.kv.list_keys(scope, USE_BUCKET, share_id + ":", limit=MAX_PAGE_SIZE)
    found: list[ShareRedemption] = []
    for key in page.keys:
        entry = await tx.kv.get(scope, USE_BUCKET, key)
        if entry is not None:
            found.append(ShareRedemption.model_validate(entry.value))
    return found


async def namespace_grants(tx: StoreTransaction, namespace: str) -> list[ShareGrant]:
    """Every grant of a namespace (the CLI's list), oldest first."""
    scope = namespace_scope(namespace)
    grants: list[ShareGrant] = []
    after: str | None = None
    while True:
        page = await tx.kv.list_keys(scope, GRANT_BUCKET, "", limit=MAX_PAGE_SIZE, after=after)
        for key in page.keys:
            grant = await load_grant(tx, namespace, key)
            if grant is not None:
                grants.append(grant)
        if page.next_after is None:
            break
        after = page.next_after
    return sorted(grants, key=lambda g: g.created_at)


async def share_summaries(
    tx: StoreTransaction, owner: SessionRef, kind: ShareKind
) -> list[JsonValue]:
    """Grants of ``owner`` of one kind with their redemptions, as describe shows them."""
    out: list[JsonValue] = []
    current = await current_epoch(tx, owner, kind)
    for grant in await owner_grants(tx, owner):
        if grant.kind != kind:
            continue
        out.append(
            {
                "share_id": grant.share_id,
                "bucket": grant.bucket,
                "access": grant.access,
                "created_at": grant.created_at.isoformat(),
                "expires_at": grant.expires_at.isoformat() if grant.expires_at else None,
                "revoked_at": grant.revoked_at.isoformat() if grant.revoked_at else None,
                "revoked_by": grant.revoked_by,
                "invalidated": grant.epoch != current,
                "redemptions": [
                    {
                        "agent_id": r.agent_id,
                        "session_id": r.session_id,
                        "turns": r.turns,
                        "writes": r.writes,
                        "last_at": r.last_at.isoformat(),
                    }
                    for r in await redemptions(tx, owner.namespace, grant.share_id)
                ],
            }
        )
    return out
