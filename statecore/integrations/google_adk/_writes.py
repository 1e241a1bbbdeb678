"""Writing ADK sessions into statecore's store: each function runs inside the caller's
transaction and raises before writing anything it would have to take back."""

from __future__ import annotations

import time
import uuid
from typing import Any

from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions import Session, _session_util

from statecore.core._errors import VersionConflictError
from statecore.core._models import Message, SessionRef
from statecore.integrations.google_adk._errors import ADKSessionExistsError, StaleADKSessionError
from statecore.integrations.google_adk._events import event_to_message
from statecore.integrations.google_adk._layout import (
    APP_BUCKET,
    USER_BUCKET,
    SessionHeader,
    adk_ids,
    check_state_keys,
    merge_shared,
    read_header,
    revision_of,
    user_key,
    write_header,
)
from statecore.integrations.google_adk._reads import build_session, shared_state
from statecore.store import StoreTransaction


def split_delta(delta: dict[str, Any], what: str) -> dict[str, dict[str, Any]]:
    """``{"app": ..., "user": ..., "session": ...}`` of a state delta, JSON-safe as ADK's
    database service stores it; ``temp:`` keys are dropped."""
    check_state_keys(delta, what)
    return _session_util.extract_json_safe_state_delta(delta)


async def apply_shared(
    tx: StoreTransaction, ref: SessionRef, user_id: str, deltas: dict[str, dict[str, Any]]
) -> None:
    await merge_shared(tx, ref.namespace, APP_BUCKET, ref.agent_id, deltas["app"])
    await merge_shared(
        tx, ref.namespace, USER_BUCKET, user_key(ref.agent_id, user_id), deltas["user"]
    )


async def create_session(
    tx: StoreTransaction, ref: SessionRef, user_id: str, state: dict[str, Any]
) -> Session:
    deltas = split_delta(state, "state")
    user_key(ref.agent_id, user_id)  # checked before anything is written
    if await tx.state.get(ref.namespace, ref.session_id, ref.agent_id) is not None:
        raise ADKSessionExistsError(f"Session with id {adk_ids(ref)[2]} already exists.")
    await tx.sessions.ensure(ref)
    await apply_shared(tx, ref, user_id, deltas)
    now = time.time()
    header = SessionHeader(
        user_id=user_id, state=deltas["session"], create_time=now, update_time=now
    )
    version = await write_header(tx, ref, header, None)
    return build_session(
        ref, header, version, [], *await shared_state(tx, ref.namespace, ref.agent_id, user_id)
    )


async def check_fresh(
    tx: StoreTransaction, ref: SessionRef, session: Session
) -> tuple[SessionHeader, int]:
    """The stored header, if ``session`` reflects it; ``StaleADKSessionError`` if another
    writer appended since ``session`` was loaded. ADK's ``SessionNotFoundError`` when the
    session is gone (or belongs to another user)."""
    found = await read_header(tx, ref)
    if found is None or found[0].user_id != session.user_id:
        raise SessionNotFoundError(f"Session {session.id} not found.")
    header, version = found
    revision = revision_of(session)
    if revision is not None:
        if revision != version:
            raise StaleADKSessionError()
    elif header.update_time > session.last_update_time:
        # A session object built elsewhere carries no revision: it is stale only when the
        # store holds events it has not seen (ADK's own fallback).
        newest = session.events[-1].id if session.events else None
        if newest != header.last_event_id:
            raise StaleADKSessionError()
    return header, version


async def store_event(tx: StoreTransaction, ref: SessionRef, session: Session, event: Event) -> int:
    """Append ``event`` (its ``temp:`` keys already trimmed) to the stored session
    ``session`` was loaded from; returns the header's new version."""
    deltas = split_delta(dict(event.actions.state_delta or {}), "state_delta")
    message = event_to_message(event)
    header, version = await check_fresh(tx, ref, session)
    await tx.conversation.append(ref, f"adk-{uuid.uuid4().hex}", [message])
    return await advance_header(tx, ref, header, version, [event], deltas)


async def advance_header(
    tx: StoreTransaction,
    ref: SessionRef,
    header: SessionHeader,
    version: int | None,
    events: list[Event],
    deltas: dict[str, dict[str, Any]],
) -> int:
    """Apply what ``events`` changed (``deltas``, already split) to the shared state and the
    header, conditional on the header ``version`` read (None: create it)."""
    await apply_shared(tx, ref, header.user_id, deltas)
    state = dict(header.state)
    state.update(deltas["session"])
    newest = events[-1] if events else None
    updated = header.model_copy(
        update={
            "state": state,
            "update_time": newest.timestamp if newest is not None else time.time(),
            "last_event_id": newest.id if newest is not None else header.last_event_id,
        }
    )
    try:
        return await write_header(tx, ref, updated, version)
    except VersionConflictError as exc:
        # Another writer committed between our read and our write.
        raise StaleADKSessionError() from exc


def messages_of(events: list[Event]) -> list[Message]:
    return [event_to_message(e) for e in events]
