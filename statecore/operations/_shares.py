"""Share tokens: one agent grants another read or read-write access to a piece of its state.

What can be shared: the owner's scoped-state document (``kind="state"``) or one of its user
KV buckets (``kind="kv"``). Flows are not shareable: a flow's checkpoints form a history that
only its own session appends to, and a second writer would fork it behind the owner's back.

Everything lives in reserved buckets of the namespace's own KV scope (``owner=""``), so every
backend gets shares without a schema of its own, and a grant can never be seen from another
namespace (a token from elsewhere is simply unknown here):

- ``share.grant``: one grant per ``share_id`` (the first hex digits of the token's SHA-256;
  the full hash is stored and compared, the token never);
- ``share.owner``: keys ``agent:session:share_id``, the grants of one owner (describe);
- ``share.use``: keys ``share_id:agent:session``, who redeemed a grant (describe);
- ``share.epoch``: keys ``agent:session:kind``, the owner's reset count of a shared store.
  A reset of that store bumps it, which refuses every token issued before with
  ShareInvalidatedError: the state it named is gone, even if a new one was written since.

Every check runs again inside the transaction that commits a write through a token, so a
token revoked, expired or invalidated after it was redeemed cannot write. Concurrent writers
are kept apart by the stores' own optimistic checks (document version, key revision): one
commits, the other gets a typed conflict.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any

from statecore.contract._shares import (
    NewShareToken,
    ShareChanges,
    SharedWriteOp,
    ShareGrant,
    ShareGrantOp,
    ShareKind,
    ShareRedemption,
)
from statecore.core._errors import (
    InvalidInputError,
    RevisionConflictError,
    ShareAccessError,
    ShareExpiredError,
    ShareInvalidatedError,
    ShareRevokedError,
    ShareTokenUnknownError,
    VersionConflictError,
)
from statecore.core._models import KVEntry, KVScope, ScopedState, SessionRef
from statecore.store._base import StoreTransaction
from statecore.store._bucket_owners import SHARE_BUCKET_PREFIX, validate_user_bucket

GRANT_BUCKET = SHARE_BUCKET_PREFIX + "grant"
OWNER_BUCKET = SHARE_BUCKET_PREFIX + "owner"
USE_BUCKET = SHARE_BUCKET_PREFIX + "use"
EPOCH_BUCKET = SHARE_BUCKET_PREFIX + "epoch"
TOKEN_PREFIX = "scs_"
#: 32 random bytes: as hard to guess as a 256-bit key.
TOKEN_BYTES = 32
SHARE_ID_HEX = 24


def new_token() -> NewShareToken:
    token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    return NewShareToken(token=token, share_id=share_id_of(token))


def token_sha256(token: str) -> str:
    if not isinstance(token, str) or not token:
        raise ShareTokenUnknownError("a share token must be a non-empty string")
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def share_id_of(token: str) -> str:
    """The id operators see and revoke by; it reveals nothing that helps guess the token."""
    return token_sha256(token)[:SHARE_ID_HEX]


def namespace_scope(namespace: str) -> KVScope:
    return KVScope(namespace=namespace, owner="")


def owner_prefix(ref: SessionRef) -> str:
    # ':' never appears in an identifier, so a prefix names exactly one owner.
    return f"{ref.agent_id}:{ref.session_id}:"


async def current_epoch(tx: StoreTransaction, ref: SessionRef, kind: ShareKind) -> int:
    scope, key = namespace_scope(ref.namespace), owner_prefix(ref) + kind
    entry = await tx.kv.get(scope, EPOCH_BUCKET, key)
    return int(entry.value["epoch"]) if entry is not None else 0


async def invalidate_shares(tx: StoreTransaction, ref: SessionRef, store: str) -> bool:
    """Called by a reset of ``store`` of ``ref``: refuse every token issued before it.
    Returns True when the owner had shared that store (and its tokens are now void)."""
    if store not in ("state", "kv"):
        return False
    key = owner_prefix(ref) + store
    entry = await tx.kv.get(namespace_scope(ref.namespace), EPOCH_BUCKET, key)
    if entry is None:
        return False
    epoch = int(entry.value["epoch"]) + 1
    await tx.kv.put(namespace_scope(ref.namespace), EPOCH_BUCKET, key, {"epoch": epoch})
    return True


async def invalidate_owner(tx: StoreTransaction, ref: SessionRef) -> None:
    """The owner session is deleted or replaced: refuse every token it issued."""
    for store in ("state", "kv"):
        await invalidate_shares(tx, ref, store)


def is_share_entry(entry: KVEntry) -> bool:
    """A namespace KV entry that belongs to share bookkeeping. Bundles leave these out: a
    grant is a capability of this database's namespace, never carried to another one."""
    return entry.bucket.startswith(SHARE_BUCKET_PREFIX)


async def load_grant(tx: StoreTransaction, namespace: str, share_id: str) -> ShareGrant | None:
    entry = await tx.kv.get(namespace_scope(namespace), GRANT_BUCKET, share_id)
    return None if entry is None else ShareGrant.model_validate(entry.value)


async def _save_grant(tx: StoreTransaction, grant: ShareGrant) -> None:
    scope = namespace_scope(grant.namespace)
    await tx.kv.put(scope, GRANT_BUCKET, grant.share_id, grant.model_dump(mode="json"))


async def create_grant(tx: StoreTransaction, owner: SessionRef, op: ShareGrantOp) -> ShareGrant:
    """Store a grant of ``owner``'s state for ``op.token``."""
    if op.kind == "kv":
        if op.bucket is None:
            raise InvalidInputError("a KV share names its bucket")
        validate_user_bucket(op.bucket)
    elif op.bucket is not None:
        raise InvalidInputError("a state share names no bucket")
    if op.kind == "state" and await _owner_state(tx, owner) is None:
        raise InvalidInputError(
            f"session {owner} has no state document to share; update turn.state first"
        )
    digest = token_sha256(op.token)
    share_id = digest[:SHARE_ID_HEX]
    scope = namespace_scope(owner.namespace)
    if await tx.kv.get(scope, GRANT_BUCKET, share_id) is not None:
        raise InvalidInputError("this token was already used for a grant; make a new one")
    epoch_key = owner_prefix(owner) + op.kind
    epoch_entry = await tx.kv.get(scope, EPOCH_BUCKET, epoch_key)
    if epoch_entry is None:
        await tx.kv.put(scope, EPOCH_BUCKET, epoch_key, {"epoch": 0})
    now = tx.now
    grant = ShareGrant(
        share_id=share_id,
        token_sha256=digest,
        namespace=owner.namespace,
        kind=op.kind,
        owner_agent=owner.agent_id,
        owner_session=owner.session_id,
        bucket=op.bucket,
        access=op.access,
        created_at=now,
        expires_at=(
            None
            if op.expires_in_seconds is None
            else now + timedelta(seconds=op.expires_in_seconds)
        ),
        epoch=int(epoch_entry.value["epoch"]) if epoch_entry is not None else 0,
    )
    await tx.kv.put(
        scope, GRANT_BUCKET, share_id, grant.model_dump(mode="json"), expected_revision=0
    )
    await tx.kv.put(scope, OWNER_BUCKET, owner_prefix(owner) + share_id, {"kind": op.kind})
    return grant


async def _owner_state(tx: StoreTransaction, owner: SessionRef) -> ScopedState | None:
    return await tx.state.get(owner.namespace, owner.session_id, owner.agent_id)


async def resolve(
    tx: StoreTransaction, namespace: str, token: str, *, kind: ShareKind, write: bool = False
) -> ShareGrant:
    """The grant ``token`` names in ``namespace``, checked for use now; a typed ShareError
    otherwise (unknown, revoked, expired, invalidated by a reset, wrong kind or access)."""
    digest = token_sha256(token)
    grant = await load_grant(tx, namespace, digest[:SHARE_ID_HEX])
    if grant is None or not hmac.compare_digest(grant.token_sha256, digest):
        raise ShareTokenUnknownError(
            f"no share of namespace {namespace!r} has this token; ask the owner for a new one"
        )
    if grant.revoked_at is not None:
        raise ShareRevokedError(
            f"share {grant.share_id} was revoked at {grant.revoked_at.isoformat()}",
            share_id=grant.share_id,
        )
    if grant.expires_at is not None and grant.expires_at <= tx.now:
        raise ShareExpiredError(
            f"share {grant.share_id} expired at {grant.expires_at.isoformat()}",
            share_id=grant.share_id,
        )
    owner = grant.owner
    reset_since = await current_epoch(tx, owner, grant.kind) != grant.epoch
    if reset_since or await tx.sessions.get(owner) is None:
        raise ShareInvalidatedError(
            f"the {grant.kind} that share {grant.share_id} named was reset or deleted; the "
            "owner must share it again",
            share_id=grant.share_id,
        )
    if grant.kind == "state" and await _owner_state(tx, owner) is None:
        raise ShareInvalidatedError(
            f"the state document that share {grant.share_id} named no longer exists",
            share_id=grant.share_id,
        )
    if grant.kind != kind:
        raise ShareAccessError(
            f"share {grant.share_id} is a {grant.kind} share, not a {kind} share",
            share_id=grant.share_id,
        )
    if write and grant.access != "read-write":
        raise ShareAccessError(
            f"share {grant.share_id} grants read access only; the owner must share it with "
            "access='read-write' for writes",
            share_id=grant.share_id,
        )
    return grant


async def read_shared_state(
    tx: StoreTransaction, namespace: str, token: str
) -> tuple[ShareGrant, ScopedState]:
    grant = await resolve(tx, namespace, token, kind="state")
    state = await _owner_state(tx, grant.owner)
    assert state is not None  # resolve() checked it, same transaction
    return grant, state


async def read_shared_kv(
    tx: StoreTransaction, namespace: str, token: str, key: str
) -> KVEntry | None:
    grant = await resolve(tx, namespace, token, kind="kv")
    assert grant.bucket is not None
    return await tx.kv.get(grant.owner.kv_scope, grant.bucket, key)


async def revoke(
    tx: StoreTransaction, namespace: str, share_id: str, *, by: SessionRef | None = None
) -> ShareGrant:
    """Revoke a grant. ``by`` is the revoking session (it must own the grant); None is an
    operator. Revoking a revoked grant keeps its first revocation."""
    grant = await load_grant(tx, namespace, share_id)
    if grant is None:
        raise ShareTokenUnknownError(f"namespace {namespace!r} has no share {share_id!r}")
    if by is not None and (by.agent_id, by.session_id) != (grant.owner_agent, grant.owner_session):
        raise ShareAccessError(
            f"only the owner ({grant.owner_agent}/{grant.owner_session}) or an operator may "
            f"revoke share {share_id}",
            share_id=share_id,
        )
    if grant.revoked_at is None:
        who = "operator" if by is None else f"owner {by.agent_id}/{by.session_id}"
        grant = grant.model_copy(update={"revoked_at": tx.now, "revoked_by": who})
        await _save_grant(tx, grant)
    return grant


async def _record_use(
    tx: StoreTransaction, grant: ShareGrant, ref: SessionRef, writes: int
) -> None:
    scope = namespace_scope(ref.namespace)
    key = f"{grant.share_id}:{ref.agent_id}:{ref.session_id}"
    found = await tx.kv.get(scope, USE_BUCKET, key)
    now = tx.now
    if found is None:
        use = ShareRedemption(
            share_id=grant.share_id,
            agent_id=ref.agent_id,
            session_id=ref.session_id,
            first_at=now,
            last_at=now,
        )
    else:
        use = ShareRedemption.model_validate(found.value)
    use = use.model_copy(
        update={"last_at": now, "turns": use.turns + 1, "writes": use.writes + writes}
    )
    await tx.kv.put(scope, USE_BUCKET, key, use.model_dump(mode="json"))


async def _apply_write(tx: StoreTransaction, ref: SessionRef, op: SharedWriteOp) -> ShareGrant:
    kind: ShareKind = "state" if op.op == "state" else "kv"
    if op.op == "use":
        # Only a record that the turn redeemed the token: its kind was checked on redeem.
        digest = token_sha256(op.token)
        grant = await load_grant(tx, ref.namespace, digest[:SHARE_ID_HEX])
        return await resolve(tx, ref.namespace, op.token, kind=grant.kind if grant else "state")
    grant = await resolve(tx, ref.namespace, op.token, kind=kind, write=True)
    owner = grant.owner
    if op.op == "state":
        if op.state is None:
            raise InvalidInputError("a shared state write carries the new document")
        try:
            await tx.state.update(
                owner.namespace,
                owner.session_id,
                owner.agent_id,
                op.state,
                expected_version=op.expected_version,
            )
        except VersionConflictError as err:
            raise VersionConflictError(
                f"share {grant.share_id}: the shared document changed since this turn read it "
                f"(version {op.expected_version}); read it again in a new turn and redo the "
                "update",
                share_id=grant.share_id,
            ) from err
        return grant
    assert grant.bucket is not None and op.key is not None
    value: Any = op.value
    if op.kind == "bytes":
        value = base64.b64decode(str(op.value), validate=True)
    try:
        if op.op == "put":
            await tx.kv.put(
                owner.kv_scope, grant.bucket, op.key, value, expected_revision=op.expected_revision
            )
        else:
            await tx.kv.delete(
                owner.kv_scope, grant.bucket, op.key, expected_revision=op.expected_revision
            )
    except RevisionConflictError as err:
        raise RevisionConflictError(
            f"share {grant.share_id}: key {op.key!r} changed since this turn read it; read it "
            "again in a new turn",
            share_id=grant.share_id,
        ) from err
    return grant


async def apply_share_changes(
    tx: StoreTransaction, ref: SessionRef, changes: ShareChanges | None
) -> None:
    """Commit a turn's share changes inside ``tx`` (the turn's own transaction): writes
    through redeemed tokens, then new grants, then revocations."""
    if changes is None or changes.empty():
        return
    used: dict[str, tuple[ShareGrant, int]] = {}
    for op in changes.writes:
        grant = await _apply_write(tx, ref, op)
        _, writes = used.get(grant.share_id, (grant, 0))
        used[grant.share_id] = (grant, writes + int(op.op != "use"))
    for grant, writes in used.values():
        await _record_use(tx, grant, ref, writes)
    for gop in changes.grants:
        await create_grant(tx, ref, gop)
    for rop in changes.revokes:
        await revoke(tx, ref.namespace, rop.share_id, by=ref)
