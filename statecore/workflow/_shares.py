"""Share tokens inside a turn (``turn.shares``): share a piece of this session's state, or
redeem a token another agent shared and read or update its state. Sandbox-safe.

::

    ticket = await turn.shares.share_state(access="read-write")  # commits with the turn
    ...
    plan = await turn.shares.redeem_state(token, Plan)           # in another session's turn
    draft = await plan.get()
    plan.update(draft.model_copy(update={"step": 2}))            # commits with that turn

Like every turn change, grants, revocations and writes through a token are buffered and
committed in the turn's transaction; the token is checked again there. A write commits only if
the shared document (or key) is still the version this turn read: two agents writing through
one token at once give one commit and one VersionConflict (RevisionConflict for KV).
"""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from statecore.contract._shares import (
    ACT_NEW_SHARE_TOKEN,
    ACT_READ_SHARED_KV,
    ACT_REDEEM_SHARE,
    NewShareToken,
    NewShareTokenInput,
    ReadSharedKVInput,
    ReadSharedKVResult,
    RedeemShareInput,
    RedeemShareResult,
    ShareAccess,
    ShareChanges,
    SharedWriteOp,
    ShareGrantOp,
    ShareRevokeOp,
)
from statecore.core._models import KVEntry, validate_key
from statecore.workflow._activity_calls import checked
from statecore.workflow._buffers import SessionReads

TState = TypeVar("TState", bound=BaseModel)

#: Must match ``statecore.operations._shares.SHARE_ID_HEX`` (the store ring is off limits here).
_SHARE_ID_HEX = 24


def _share_id(token_or_id: str) -> str:
    if token_or_id.startswith("scs_"):
        return hashlib.sha256(token_or_id.encode("utf-8")).hexdigest()[:_SHARE_ID_HEX]
    return token_or_id


def _seconds(expires_in: timedelta | float | None) -> float | None:
    if isinstance(expires_in, timedelta):
        return expires_in.total_seconds()
    return expires_in


class SharedState(Generic[TState]):
    """Another agent's scoped-state document, reached through a token."""

    def __init__(
        self, shares: TurnShares, token: str, found: RedeemShareResult, model: type[TState]
    ):
        self._shares = shares
        self._token = token
        self.info = found
        self._model = model
        self._base = model.model_validate(found.state or {})
        self._pending: TState | None = None

    @property
    def version(self) -> int | None:
        """The version this turn read; an update commits only if it is still current."""
        return self.info.version

    async def get(self) -> TState:
        return self._pending if self._pending is not None else self._base

    def update(self, state: TState) -> None:
        if not isinstance(state, self._model):
            raise ApplicationError(
                f"state must be a {self._model.__name__}", type="InvalidInput", non_retryable=True
            )
        if self.info.access != "read-write":
            raise ApplicationError(
                f"share {self.info.share_id} grants read access only",
                type="ShareAccessDenied",
                non_retryable=True,
            )
        self._pending = state
        self._shares._set_state_write(
            self._token,
            SharedWriteOp(
                token=self._token,
                op="state",
                state=state.model_dump(mode="json"),
                expected_version=self.info.version,
            ),
        )


class SharedKV:
    """Another agent's KV bucket, reached through a token. A write commits only if the key is
    still at the revision this turn read (or ``expected_revision`` when given)."""

    def __init__(self, shares: TurnShares, token: str, found: RedeemShareResult) -> None:
        self._shares = shares
        self._token = token
        self.info = found
        self._read: dict[str, int] = {}
        self._local: dict[str, Any] = {}
        self._deleted: set[str] = set()

    async def get(self, key: str) -> Any:
        if key in self._deleted:
            return None
        if key in self._local:
            return self._local[key]
        out: ReadSharedKVResult = await self._shares._session.run_sql(
            ACT_READ_SHARED_KV,
            ReadSharedKVInput(ref=self._shares._session.ref, token=self._token, key=key),
            ReadSharedKVResult,
        )
        entry: KVEntry | None = out.entry
        self._read[key] = entry.revision if entry is not None else 0
        return None if entry is None else entry.value

    def _check_write(self) -> None:
        if self.info.access != "read-write":
            raise ApplicationError(
                f"share {self.info.share_id} grants read access only",
                type="ShareAccessDenied",
                non_retryable=True,
            )

    def put(self, key: str, value: Any, *, expected_revision: int | None = None) -> None:
        checked(lambda: validate_key(key))
        self._check_write()
        if isinstance(value, bytes | bytearray):
            encoded: dict[str, Any] = {
                "kind": "bytes",
                "value": base64.b64encode(bytes(value)).decode("ascii"),
            }
        else:
            encoded = {"value": value}
        revision = expected_revision if expected_revision is not None else self._read.get(key)
        op = checked(
            lambda: SharedWriteOp(
                token=self._token, op="put", key=key, expected_revision=revision, **encoded
            )
        )
        self._shares._writes.append(op)
        self._local[key] = value
        self._deleted.discard(key)

    def delete(self, key: str, *, expected_revision: int | None = None) -> None:
        checked(lambda: validate_key(key))
        self._check_write()
        revision = expected_revision if expected_revision is not None else self._read.get(key)
        self._shares._writes.append(
            SharedWriteOp(token=self._token, op="delete", key=key, expected_revision=revision)
        )
        self._local.pop(key, None)
        self._deleted.add(key)


class TurnShares:
    """``turn.shares``: grants of this session's state and tokens redeemed by this turn."""

    def __init__(self, session: SessionReads) -> None:
        self._session = session
        self._grants: list[ShareGrantOp] = []
        self._revokes: list[ShareRevokeOp] = []
        self._writes: list[SharedWriteOp] = []
        self._used: list[str] = []
        self._state_writes: dict[str, SharedWriteOp] = {}

    async def _new(self) -> NewShareToken:
        made: NewShareToken = await self._session.run_sql(
            ACT_NEW_SHARE_TOKEN, NewShareTokenInput(ref=self._session.ref), NewShareToken
        )
        return made

    async def share_state(
        self, *, access: ShareAccess = "read", expires_in: timedelta | float | None = None
    ) -> NewShareToken:
        """Share this session's scoped-state document (as committed by this turn). The token
        works once the turn commits; hand ``ticket.token`` to the other agent."""
        ticket = await self._new()
        self._grants.append(
            checked(
                lambda: ShareGrantOp(
                    token=ticket.token,
                    kind="state",
                    access=access,
                    expires_in_seconds=_seconds(expires_in),
                )
            )
        )
        return ticket

    async def share_kv(
        self,
        bucket: str,
        *,
        access: ShareAccess = "read",
        expires_in: timedelta | float | None = None,
    ) -> NewShareToken:
        """Share one KV bucket of this session (see ``share_state``)."""
        ticket = await self._new()
        self._grants.append(
            checked(
                lambda: ShareGrantOp(
                    token=ticket.token,
                    kind="kv",
                    bucket=bucket,
                    access=access,
                    expires_in_seconds=_seconds(expires_in),
                )
            )
        )
        return ticket

    def revoke(self, token_or_share_id: str) -> None:
        """Revoke one of this session's grants when the turn commits."""
        self._revokes.append(ShareRevokeOp(share_id=_share_id(token_or_share_id)))

    async def _redeem(self, token: str, kind: str) -> RedeemShareResult:
        found: RedeemShareResult = await self._session.run_sql(
            ACT_REDEEM_SHARE,
            checked(lambda: RedeemShareInput(ref=self._session.ref, token=token, kind=kind)),
            RedeemShareResult,
        )
        if token not in self._used:
            self._used.append(token)
        return found

    async def redeem_state(self, token: str, model: type[TState]) -> SharedState[TState]:
        """Reach the scoped-state document ``token`` grants (typed as ``model``)."""
        return SharedState(self, token, await self._redeem(token, "state"), model)

    async def redeem_kv(self, token: str) -> SharedKV:
        """Reach the KV bucket ``token`` grants."""
        return SharedKV(self, token, await self._redeem(token, "kv"))

    def _set_state_write(self, token: str, op: SharedWriteOp) -> None:
        self._state_writes[token] = op

    def _changes(self) -> ShareChanges | None:
        # Every redeemed token is recorded, also when only read; then its writes, in order.
        writes = [SharedWriteOp(token=t, op="use") for t in self._used]
        writes += list(self._state_writes.values()) + self._writes
        changes = ShareChanges(grants=self._grants, revokes=self._revokes, writes=writes)
        return None if changes.empty() else changes
