"""Running a whole transaction again when it lost to a concurrent one.

Deadlocks and serialization failures are part of normal life for a SQL database under
contention: the database picks a victim, rolls its transaction back and expects the caller to
run it again. ``run_transaction`` does that at the contract level, so a turn that lost a
deadlock costs a few milliseconds instead of a Temporal activity retry with its backoff.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from statecore.store._base import RestartTransaction, StateStore, StoreTransaction
from statecore.store._inputs import check_flag, check_int

T = TypeVar("T")

log = logging.getLogger("statecore.store")

#: How many times ``run_transaction`` runs the work by default (the first run included).
DEFAULT_ATTEMPTS = 5
#: The most attempts a caller may ask for: beyond that a conflict is not transient any more.
MAX_ATTEMPTS = 100
#: The pause before the second run is up to this long; it doubles per run, up to the cap.
FIRST_PAUSE_SECONDS = 0.02
MAX_PAUSE_SECONDS = 0.5
#: How many times a store may ask for a transaction to run again at once
#: (``RestartTransaction``), on top of the attempts: each restart leaves a shortcut behind,
#: so a second one in a row is already unusual.
MAX_RESTARTS = 3


def retry_pause(attempt: int) -> float:
    """Seconds to wait after failed run number ``attempt`` (1 = the first run).

    Full jitter: racers that deadlocked together wake at different times instead of meeting
    in the same deadlock again."""
    cap = min(MAX_PAUSE_SECONDS, FIRST_PAUSE_SECONDS * 2 ** (attempt - 1))
    return random.uniform(0.0, cap)


async def run_transaction(
    store: StateStore,
    work: Callable[[StoreTransaction], Awaitable[T]],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    read_only: bool = False,
) -> T:
    """``await work(tx)`` in a transaction of ``store``; its result once the transaction commits.

    On a transient conflict (``store.is_transient_error``: deadlock, serialization failure,
    lock wait timeout, SQLite busy), whether raised by a statement or by the commit, the
    transaction has been rolled back whole and ``work`` runs again in a new one, up to
    ``attempts`` runs in all (1..100). ``work`` must be safe to re-run: it changes nothing
    outside ``tx``. ``read_only`` opens read-only transactions (see
    ``StateStore.transaction``). Any other error is raised at once; the last conflict is
    raised when the attempts are used up. A store that asks for the transaction to run
    again (``RestartTransaction``: it wrote nothing) has it run again at once, without a
    pause and without using an attempt, up to ``MAX_RESTARTS`` times. Do not call it inside
    an open transaction of the same store."""
    check_int(attempts, "attempts", minimum=1, maximum=MAX_ATTEMPTS)
    check_flag(read_only, "read_only")
    attempt, restarts = 1, 0
    while True:
        try:
            # A store written before read-only transactions existed takes no argument.
            opened = store.transaction(read_only=True) if read_only else store.transaction()
            async with opened as tx:
                return await work(tx)
        except RestartTransaction as restart:
            if restarts >= MAX_RESTARTS:
                raise
            restarts += 1
            log.debug("transaction runs again at once: %s", restart)
            continue
        except Exception as error:
            if attempt >= attempts or not store.is_transient_error(error):
                raise
            pause = retry_pause(attempt)
            log.info(
                "transaction lost to a concurrent one (%s); running it again in %.0f ms "
                "(attempt %d of %d)",
                type(error).__name__,
                pause * 1000,
                attempt + 1,
                attempts,
            )
            await asyncio.sleep(pause)
            attempt += 1


__all__ = ["DEFAULT_ATTEMPTS", "MAX_ATTEMPTS", "MAX_RESTARTS", "retry_pause", "run_transaction"]
