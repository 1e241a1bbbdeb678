"""When an idle session expires, as its header row stores it.

``statecore_sessions.expires_at`` is indexed, so that the sweep (``sessions.expired``) finds
expired sessions with a range scan. On PostgreSQL an UPDATE that changes an indexed column
cannot be a heap-only (HOT) update: the new row version gets an entry in every index of the
table, and the old version and its entries stay until vacuum. Every turn moves a session's
idle clock, so with the exact expiry stored each turn's header update would grow all three
of the sessions table's indexes by one entry, and a lookup of an active session would step
over the dead versions of its row until vacuum ran.

The stored expiry is the exact one (last access plus the TTL) rounded up to a step of a 64th
of the TTL, at most a minute: the turns of an active session within one step store the same
value, their header updates change no indexed column, and PostgreSQL prunes the old row
versions in place. A session is never swept before its TTL has passed, and at most one step
(1/64 of the TTL, a minute at most) after. The UPDATE still names the column, so that a
turn's statements are the same whatever the clock reads; PostgreSQL compares the values.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: The stored expiry is late by at most this fraction of the TTL...
EXPIRY_STEP_FRACTION = 64
#: ...and at most this long.
MAX_EXPIRY_STEP = timedelta(minutes=1)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def expiry_step(ttl_seconds: int) -> timedelta:
    """How much later than its exact expiry a session with this TTL may be swept."""
    return min(timedelta(seconds=ttl_seconds) / EXPIRY_STEP_FRACTION, MAX_EXPIRY_STEP)


def expiry(last_accessed: datetime, ttl_seconds: int) -> datetime:
    """The expiry stored for a session last accessed at ``last_accessed`` (timezone-aware):
    ``last_accessed + ttl_seconds``, rounded up to a multiple of ``expiry_step`` counted from
    the Unix epoch, so every access within one step stores the same moment."""
    exact = last_accessed + timedelta(seconds=ttl_seconds)
    step = expiry_step(ttl_seconds) // _MICROSECOND
    if step <= 1:
        return exact
    since_epoch = (exact - _EPOCH) // _MICROSECOND
    return _EPOCH + _MICROSECOND * (-(-since_epoch // step) * step)


__all__ = ["EXPIRY_STEP_FRACTION", "MAX_EXPIRY_STEP", "expiry", "expiry_step"]
