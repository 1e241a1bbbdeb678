"""A pooled PostgreSQL or MariaDB connection is pinged before use only if it sat idle.

SQLAlchemy's ``pool_pre_ping`` pings on every checkout: a round trip before each
transaction, about a third of a small transaction's CPU (two per turn). Here a connection is
pinged when it comes out of the pool after at least ``PING_AFTER_IDLE_SECONDS`` there. A
ping that fails with what the dialect reads as a disconnect replaces that connection and
every connection pooled before it, as ``pool_pre_ping`` does (the engine's ``handle_error``
listeners are not consulted for it).

What the ping guards against is a connection that died while it sat in the pool: a database
restart or failover, a server or proxy closing idle sessions. A restart takes longer than the
threshold, so every connection checked in before it has been idle longer than that when it
is next used, and is pinged. Idle time is the larger of what the monotonic clock and the
wall clock say, so a machine suspended in between counts as idle. A connection back in use
within the threshold is known alive from its last transaction; if it dies in between all
the same, its next transaction fails with the driver's disconnect error, as any transaction
does when the connection drops mid-way, and the pool then replaces every older connection.
A Temporal activity retries that transaction; a caller of the store directly sees the error.

The pool hands out the connection returned last (``pool_use_lifo``) unless told otherwise, so
a store in steady use keeps reusing the same warm connections instead of rotating through
all of them and finding each one idle. A ``pool_pre_ping`` the caller passes is kept as
given, and this check is not installed.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import InvalidatePoolError
from sqlalchemy.ext.asyncio import AsyncEngine

#: Seconds a connection may sit in the pool and still be used without a ping.
PING_AFTER_IDLE_SECONDS = 1.0
# Where a pooled connection's record keeps when it went back into the pool.
_IDLE_SINCE = "statecore_idle_since"


def ping_after_idle(engine: AsyncEngine, seconds: float = PING_AFTER_IDLE_SECONDS) -> None:
    """Ping ``engine``'s pooled connections at checkout when they were idle ``seconds``."""
    pool = engine.sync_engine.pool
    dialect = engine.sync_engine.dialect

    def checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = (time.monotonic(), time.time())

    def checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.pop(_IDLE_SINCE, None)
        if since is None:
            return  # just opened
        # The monotonic clock stands still while the machine is suspended; the wall clock
        # does not (but may be set back): idle is what either of them says.
        idle = max(time.monotonic() - since[0], time.time() - since[1])
        if idle < seconds:
            return  # in use a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if dialect.is_disconnect(error, dbapi_connection, None):
                # As pool_pre_ping does: this connection and every one pooled before it
                # are replaced, and the checkout goes on with a new connection.
                raise InvalidatePoolError(
                    f"idle connection did not answer a ping: {error}"
                ) from error
            raise

    event.listen(pool, "checkin", checked_in)
    event.listen(pool, "checkout", checked_out)
