"""Share tokens as they cross the activity boundary: the buffered share changes of a turn,
the redeem and read calls, and the stored grant.

A token is a capability: whoever holds it reaches the owner's shared state, so the database
keeps only its SHA-256. Grant and revocation, and every write through a token, are buffered
in the turn like its other changes and committed in its transaction. Imported by workflow
code, so it stays pure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field, JsonValue

from statecore.core._models import KVEntry, SessionRef, StatecoreModel

ACT_NEW_SHARE_TOKEN = "statecore.new_share_token"
ACT_REDEEM_SHARE = "statecore.redeem_share"
ACT_READ_SHARED_KV = "statecore.read_shared_kv"

ShareKind = Literal["state", "kv"]
ShareAccess = Literal["read", "read-write"]


class NewShareTokenInput(StatecoreModel):
    """The session asking for a token (for logs; the token names no session until granted)."""

    ref: SessionRef


class NewShareToken(StatecoreModel):
    """A fresh token and the id operators see for it (``share_id``, derived from its hash)."""

    token: str
    share_id: str


class ShareGrantOp(StatecoreModel):
    """The owner shares its scoped-state document (``kind="state"``) or one KV bucket."""

    model_config = ConfigDict(extra="forbid")

    token: str
    kind: ShareKind
    bucket: str | None = None
    access: ShareAccess = "read"
    #: Seconds from the commit; None never expires (it can still be revoked).
    expires_in_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class ShareRevokeOp(StatecoreModel):
    share_id: str


class SharedWriteOp(StatecoreModel):
    """A change made through a redeemed token; ``op="use"`` only records the redemption."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    token: str
    op: Literal["use", "state", "put", "delete"]
    #: The document's version the turn read: the write commits only if it is still current.
    expected_version: int | None = None
    state: dict[str, JsonValue] | None = None
    key: str | None = None
    kind: Literal["json", "bytes"] = "json"
    value: JsonValue = None
    expected_revision: int | None = None


class ShareChanges(StatecoreModel):
    """A turn's share changes, committed with the turn."""

    grants: list[ShareGrantOp] = Field(default_factory=list)
    revokes: list[ShareRevokeOp] = Field(default_factory=list)
    writes: list[SharedWriteOp] = Field(default_factory=list)

    def empty(self) -> bool:
        return not (self.grants or self.revokes or self.writes)


class ShareGrant(StatecoreModel):
    """A stored grant (the token itself is never stored, only its hash)."""

    share_id: str
    token_sha256: str
    namespace: str
    kind: ShareKind
    owner_agent: str
    owner_session: str
    bucket: str | None = None
    access: ShareAccess
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    #: The owner's reset count of the shared store when it was shared: a later reset makes
    #: every token issued before it refuse with ShareInvalidated.
    epoch: int = 0

    @property
    def owner(self) -> SessionRef:
        return SessionRef(
            namespace=self.namespace, agent_id=self.owner_agent, session_id=self.owner_session
        )


class ShareRedemption(StatecoreModel):
    """Who used a grant, when, and how many of its turns wrote through it."""

    share_id: str
    agent_id: str
    session_id: str
    first_at: datetime
    last_at: datetime
    turns: int = 0
    writes: int = 0


class RedeemShareInput(StatecoreModel):
    ref: SessionRef
    token: str
    kind: ShareKind


class RedeemShareResult(StatecoreModel):
    share_id: str
    kind: ShareKind
    access: ShareAccess
    owner_agent: str
    owner_session: str
    bucket: str | None = None
    expires_at: datetime | None = None
    #: The shared document and its version (kind "state").
    state: dict[str, JsonValue] | None = None
    version: int | None = None


class ReadSharedKVInput(StatecoreModel):
    ref: SessionRef
    token: str
    key: str


class ReadSharedKVResult(StatecoreModel):
    entry: KVEntry | None = None
