"""Share tokens on every backend: a grant committed with the owner's turn, redeemed and
written through in another session's turn, and every refusal leaving the state untouched."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from statecore.contract._activities import CommitTurnInput, StateOp
from statecore.contract._shares import ShareChanges, SharedWriteOp, ShareGrantOp, ShareRevokeOp
from statecore.core._errors import (
    InvalidIdentifierError,
    InvalidInputError,
    RevisionConflictError,
    ShareAccessError,
    ShareError,
    ShareExpiredError,
    ShareInvalidatedError,
    ShareRevokedError,
    ShareTokenUnknownError,
    VersionConflictError,
)
from statecore.core._models import SessionRef
from statecore.operations._bundles import export_namespace, export_session, import_session
from statecore.operations._control_plane import describe, reset
from statecore.operations._shares import (
    GRANT_BUCKET,
    new_token,
    read_shared_kv,
    read_shared_state,
    revoke,
)
from statecore.operations._turn_commit import commit_turn
from statecore.store import StateStore
from tests.store.conftest import FakeClock

_turns = 0


def _turn(ref: SessionRef, **changes: Any) -> CommitTurnInput:
    global _turns
    _turns += 1
    return CommitTurnInput(ref=ref, turn_id=f"t{_turns}", turn=_turns, **changes)


async def _commit(store: StateStore, commit: CommitTurnInput) -> None:
    async with store.transaction() as tx:
        await commit_turn(tx, commit)


async def _share_plan(
    store: StateStore, owner: SessionRef, access: str = "read-write", **grant: Any
) -> str:
    """The owner writes its plan and shares it in the same turn; returns the token."""
    ticket = new_token()
    await _commit(
        store,
        _turn(
            owner,
            state=StateOp(state={"steps": ["draft"]}),
            shares=ShareChanges(
                grants=[ShareGrantOp(token=ticket.token, kind="state", access=access, **grant)]
            ),
        ),
    )
    return ticket.token


def _write(token: str, version: int | None, steps: list[str]) -> ShareChanges:
    return ShareChanges(
        writes=[
            SharedWriteOp(token=token, op="use"),
            SharedWriteOp(
                token=token, op="state", state={"steps": steps}, expected_version=version
            ),
        ]
    )


async def _plan(store: StateStore, owner: SessionRef) -> tuple[list[str], int]:
    async with store.transaction() as tx:
        doc = await tx.state.get(owner.namespace, owner.session_id, owner.agent_id)
    assert doc is not None
    return doc.state["steps"], doc.version  # type: ignore[return-value]


@pytest.fixture
def pair(make_ref: Callable[..., SessionRef]) -> tuple[SessionRef, SessionRef]:
    return make_ref("plan-1", "planner"), make_ref("task-9", "worker")


async def test_redeem_read_and_update_through_a_token(
    store: StateStore, pair: tuple[SessionRef, SessionRef]
) -> None:
    owner, other = pair
    token = await _share_plan(store, owner)
    async with store.transaction(read_only=True) as tx:
        grant, doc = await read_shared_state(tx, other.namespace, token)
    assert grant.owner == owner and grant.access == "read-write"
    assert doc.state == {"steps": ["draft"]} and doc.version == 1

    await _commit(store, _turn(other, shares=_write(token, 1, ["draft", "review"])))
    assert await _plan(store, owner) == (["draft", "review"], 2)

    report = await describe(store, owner)
    state = report.store("state")
    assert state is not None
    [shared] = state.metadata["shares"]  # type: ignore[misc]
    assert shared["access"] == "read-write" and shared["revoked_at"] is None  # type: ignore[index]
    [use] = shared["redemptions"]  # type: ignore[index]
    assert (use["agent_id"], use["session_id"], use["writes"]) == ("worker", "task-9", 1)
    # The token itself is never stored: only its hash.
    async with store.transaction(read_only=True) as tx:
        entries = await tx.kv.entries(_ns_scope(owner))
    assert entries and all(token not in repr(e.value) for e in entries)


def _ns_scope(ref: SessionRef) -> Any:
    from statecore.core._models import KVScope

    return KVScope(namespace=ref.namespace, owner="")


async def test_two_writers_with_one_version_give_one_commit_and_one_conflict(
    store: StateStore, pair: tuple[SessionRef, SessionRef], make_ref: Callable[..., SessionRef]
) -> None:
    owner, first = pair
    second = make_ref("task-10", "worker")
    token = await _share_plan(store, owner)
    await _commit(store, _turn(first, shares=_write(token, 1, ["first"])))
    with pytest.raises(VersionConflictError):
        await _commit(store, _turn(second, shares=_write(token, 1, ["second"])))
    assert await _plan(store, owner) == (["first"], 2)
    # The losing turn rolled back whole: its session has no record of it.
    async with store.transaction(read_only=True) as tx:
        assert await tx.sessions.get(second) is None


async def _refused(
    store: StateStore,
    owner: SessionRef,
    writer: SessionRef,
    token: str,
    error: type[ShareError],
) -> None:
    before = await _plan(store, owner)
    with pytest.raises(error):
        await _commit(store, _turn(writer, shares=_write(token, before[1], ["hacked"])))
    with pytest.raises(error):
        async with store.transaction(read_only=True) as tx:
            await read_shared_state(tx, writer.namespace, token)
    assert await _plan(store, owner) == before


async def test_guessed_and_foreign_tokens_are_unknown(
    store: StateStore, pair: tuple[SessionRef, SessionRef], make_ref: Callable[..., SessionRef]
) -> None:
    owner, other = pair
    token = await _share_plan(store, owner)
    await _refused(store, owner, other, new_token().token, ShareTokenUnknownError)
    # Same share id (first hash digits) is not enough: the whole hash must match.
    await _refused(store, owner, other, token[:-2] + "xx", ShareTokenUnknownError)
    foreign = make_ref("task-9", "worker", namespace=f"{owner.namespace}x")
    with pytest.raises(ShareTokenUnknownError):
        await _commit(store, _turn(foreign, shares=_write(token, 1, ["x"])))
    assert await _plan(store, owner) == (["draft"], 1)


async def test_expired_token_is_refused(
    store: StateStore, pair: tuple[SessionRef, SessionRef], clock: FakeClock
) -> None:
    owner, other = pair
    token = await _share_plan(store, owner, expires_in_seconds=60)
    clock.advance(30)
    await _commit(store, _turn(other, shares=_write(token, 1, ["in time"])))
    clock.advance(31)
    await _refused(store, owner, other, token, ShareExpiredError)


async def test_revoked_by_owner_or_operator_is_refused(
    store: StateStore, pair: tuple[SessionRef, SessionRef]
) -> None:
    owner, other = pair
    by_owner = await _share_plan(store, owner)
    by_operator = await _share_plan(store, owner)
    # Only the owner revokes through a turn.
    with pytest.raises(ShareAccessError):
        await _commit(
            store,
            _turn(other, shares=ShareChanges(revokes=[ShareRevokeOp(share_id=_id(by_owner))])),
        )
    await _commit(
        store, _turn(owner, shares=ShareChanges(revokes=[ShareRevokeOp(share_id=_id(by_owner))]))
    )
    await _refused(store, owner, other, by_owner, ShareRevokedError)
    async with store.transaction() as tx:
        grant = await revoke(tx, owner.namespace, _id(by_operator))
    assert grant.revoked_by == "operator"
    await _refused(store, owner, other, by_operator, ShareRevokedError)


def _id(token: str) -> str:
    from statecore.operations._shares import share_id_of

    return share_id_of(token)


async def test_write_through_a_read_grant_is_refused(
    store: StateStore, pair: tuple[SessionRef, SessionRef]
) -> None:
    owner, other = pair
    token = await _share_plan(store, owner, access="read")
    async with store.transaction(read_only=True) as tx:
        _, doc = await read_shared_state(tx, other.namespace, token)
    assert doc.state == {"steps": ["draft"]}
    with pytest.raises(ShareAccessError):
        await _commit(store, _turn(other, shares=_write(token, 1, ["x"])))
    assert await _plan(store, owner) == (["draft"], 1)


async def test_reset_of_the_owners_state_voids_its_tokens(
    store: StateStore, pair: tuple[SessionRef, SessionRef]
) -> None:
    owner, other = pair
    token = await _share_plan(store, owner)
    result = await reset(store, owner, stores=["state"])
    assert result.cleared == ["state"]
    # A new document after the reset is not what the token named.
    await _commit(store, _turn(owner, state=StateOp(state={"steps": ["new"]})))
    await _refused(store, owner, other, token, ShareInvalidatedError)
    shares = (await describe(store, owner)).store("state").metadata["shares"]  # type: ignore[union-attr]
    assert shares[0]["invalidated"] is True  # type: ignore[index]


async def test_kv_bucket_share(store: StateStore, pair: tuple[SessionRef, SessionRef]) -> None:
    owner, other = pair
    ticket = new_token()
    await _commit(
        store,
        _turn(
            owner,
            kv=[{"op": "put", "bucket": "notes", "key": "k", "value": 1}],  # type: ignore[list-item]
            shares=ShareChanges(
                grants=[
                    ShareGrantOp(token=ticket.token, kind="kv", bucket="notes", access="read-write")
                ]
            ),
        ),
    )
    token = ticket.token
    async with store.transaction(read_only=True) as tx:
        entry = await read_shared_kv(tx, other.namespace, token, "k")
    assert entry is not None and entry.value == 1 and entry.revision == 1

    def put(value: int, revision: int | None) -> ShareChanges:
        return ShareChanges(
            writes=[
                SharedWriteOp(
                    token=token, op="put", key="k", value=value, expected_revision=revision
                )
            ]
        )

    await _commit(store, _turn(other, shares=put(2, 1)))
    with pytest.raises(RevisionConflictError):
        await _commit(store, _turn(other, shares=put(3, 1)))
    async with store.transaction(read_only=True) as tx:
        got = await tx.kv.get(owner.kv_scope, "notes", "k")
        # The token reaches its bucket only, and a state token is not a KV token.
        with pytest.raises(ShareAccessError):
            await read_shared_state(tx, other.namespace, token)
    assert got is not None and (got.value, got.revision) == (2, 2)
    with pytest.raises(ShareInvalidatedError):
        await reset(store, owner, stores=["kv"])
        await _commit(store, _turn(other, shares=put(4, None)))


async def test_grant_bookkeeping_is_out_of_reach_of_user_buckets(
    store: StateStore, pair: tuple[SessionRef, SessionRef]
) -> None:
    owner, _ = pair
    with pytest.raises(InvalidIdentifierError):
        await _commit(
            store,
            _turn(owner, kv=[{"op": "put", "bucket": GRANT_BUCKET, "key": "k", "value": 1}]),  # type: ignore[list-item]
        )
    with pytest.raises(InvalidIdentifierError):
        await _commit(
            store,
            _turn(
                owner,
                state=StateOp(state={}),
                shares=ShareChanges(
                    grants=[ShareGrantOp(token=new_token().token, kind="kv", bucket="share.x")]
                ),
            ),
        )
    # Nothing to share yet: the owner has no document.
    with pytest.raises(InvalidInputError):
        await _commit(
            store,
            _turn(
                owner,
                shares=ShareChanges(grants=[ShareGrantOp(token=new_token().token, kind="state")]),
            ),
        )


async def test_bundles_carry_no_grants_and_an_import_voids_the_old_tokens(
    store: StateStore, pair: tuple[SessionRef, SessionRef]
) -> None:
    owner, other = pair
    token = await _share_plan(store, owner)
    bundle = await export_namespace(store, owner.namespace)
    assert not [e for e in bundle.kv if e.bucket.startswith("share.")]
    session_bundle = await export_session(store, owner)
    await import_session(store, session_bundle, target=owner, replace=True)
    await _refused(store, owner, other, token, ShareInvalidatedError)
