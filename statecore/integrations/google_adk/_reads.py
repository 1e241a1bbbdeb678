"""Reading ADK sessions out of statecore's store (one read transaction each)."""

from __future__ import annotations

from typing import Any

from google.adk.events.event import Event
from google.adk.sessions import Session
from google.adk.sessions.base_session_service import GetSessionConfig

from statecore.core._models import SessionRef, StoredMessage
from statecore.integrations.google_adk._events import message_to_event
from statecore.integrations.google_adk._layout import (
    APP_BUCKET,
    USER_BUCKET,
    SessionHeader,
    adk_ids,
    merged_state,
    read_header,
    read_shared,
    set_revision,
    user_key,
)
from statecore.store import StoreTransaction


async def shared_state(
    tx: StoreTransaction, namespace: str, app_name: str, user_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(app state, user state), without prefixes."""
    app, _ = await read_shared(tx, namespace, APP_BUCKET, app_name)
    user, _ = await read_shared(tx, namespace, USER_BUCKET, user_key(app_name, user_id))
    return app, user


async def load_session(
    tx: StoreTransaction,
    ref: SessionRef,
    user_id: str,
    config: GetSessionConfig | None,
) -> Session | None:
    """The ADK session ``ref`` owned by ``user_id`` with the events ``config`` asks for, or
    None (absent, or another user's)."""
    found = await read_header(tx, ref)
    if found is None or found[0].user_id != user_id:
        return None
    header, version = found
    events: list[Event] = []
    if config is None or config.num_recent_events != 0:
        stored = await tx.conversation.messages(ref)
        events = select_events(stored, config)
    return build_session(
        ref, header, version, events, *await shared_state(tx, ref.namespace, ref.agent_id, user_id)
    )


def select_events(stored: list[StoredMessage], config: GetSessionConfig | None) -> list[Event]:
    """The events ADK's services return for ``config``: the newest ``num_recent_events``,
    then those at or after ``after_timestamp``."""
    events = [message_to_event(m) for m in stored]
    if config is None:
        return events
    if config.num_recent_events is not None:
        events = events[-config.num_recent_events :] if config.num_recent_events else []
    if config.after_timestamp is not None:
        events = [e for e in events if e.timestamp >= config.after_timestamp]
    return events


def build_session(
    ref: SessionRef,
    header: SessionHeader,
    version: int,
    events: list[Event],
    app_state: dict[str, Any],
    user_state: dict[str, Any],
) -> Session:
    session = Session(
        id=adk_ids(ref)[2],
        app_name=ref.agent_id,
        user_id=header.user_id,
        state=merged_state(dict(header.state), app_state, user_state),
        events=events,
        last_update_time=header.update_time,
    )
    set_revision(session, version)
    return session
