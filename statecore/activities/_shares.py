"""Share-token activities: make a token, redeem one, read a shared KV key.

Making a token needs a secure random source, which workflow code must not touch (it would
not replay), so a local activity makes it and history keeps the result. Redeeming and reading
check the grant in a read-only transaction; the check runs again when the turn commits.
"""

from __future__ import annotations

from temporalio import activity

from statecore.activities._failures import typed_errors
from statecore.activities._resources import WorkerResources, json_size
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
)
from statecore.core._errors import ContentTooLargeError, StateTooLargeError
from statecore.core._models import validate_key
from statecore.operations._shares import new_token, read_shared_kv, read_shared_state, resolve
from statecore.store import StoreTransaction, run_transaction


class ShareActivities:
    def __init__(self, resources: WorkerResources) -> None:
        self._r = resources

    @activity.defn(name=ACT_NEW_SHARE_TOKEN)
    @typed_errors
    async def new_share_token(self, input: NewShareTokenInput) -> NewShareToken:
        return new_token()

    @activity.defn(name=ACT_REDEEM_SHARE)
    @typed_errors
    async def redeem_share(self, input: RedeemShareInput) -> RedeemShareResult:
        namespace = input.ref.namespace

        async def read(tx: StoreTransaction) -> RedeemShareResult:
            if input.kind == "state":
                grant, state = await read_shared_state(tx, namespace, input.token)
                found = {"state": state.state, "version": state.version}
            else:
                grant = await resolve(tx, namespace, input.token, kind="kv")
                found = {}
            return RedeemShareResult(
                share_id=grant.share_id,
                kind=grant.kind,
                access=grant.access,
                owner_agent=grant.owner_agent,
                owner_session=grant.owner_session,
                bucket=grant.bucket,
                expires_at=grant.expires_at,
                **found,
            )

        result = await run_transaction(self._r.store, read, read_only=True)
        if result.state is not None and not self._r.large_values:
            what = "the shared scoped state"
            self._r.check_inline(json_size(result.state), what, StateTooLargeError)
        return result

    @activity.defn(name=ACT_READ_SHARED_KV)
    @typed_errors
    async def read_shared_kv(self, input: ReadSharedKVInput) -> ReadSharedKVResult:
        validate_key(input.key)
        entry = await run_transaction(
            self._r.store,
            lambda tx: read_shared_kv(tx, input.ref.namespace, input.token, input.key),
            read_only=True,
        )
        if entry is not None and not self._r.large_values:
            size = len(entry.value) if entry.kind == "bytes" else json_size(entry.value)
            self._r.check_inline(size, f"shared KV value {input.key}", ContentTooLargeError)
        return ReadSharedKVResult(entry=entry)
