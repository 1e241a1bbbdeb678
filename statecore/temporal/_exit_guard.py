"""Temporal's native client must be gone before the interpreter tears down.

A program that ends with an uncaught exception (a typed InvalidIdentifierError from
``send``, say) keeps that exception's traceback in ``sys.last_traceback`` until the very end
of interpreter teardown, and with it every frame's locals: the connected ``Client`` among
them. Dropped that late, the client's native (Rust) side releases the Python objects it holds
from one of its own threads while the interpreter is finalizing, and the process can abort
with ``Fatal Python error: PyGILState_Release`` (exit code 134) instead of exiting 1.

``atexit`` handlers run before that teardown, with the interpreter whole. The one registered
here drops the last uncaught exception (it has been printed by then) and collects garbage,
so the client, its connections and its worker threads' references are released while
releasing them is still safe. A program that keeps a client in a global of its own past
``asyncio.run`` should close it itself; nothing here can reach that reference.
"""

from __future__ import annotations

import atexit
import gc
import sys

_registered = False


def release_native_clients_at_exit() -> None:
    """Register the exit hook once per process (idempotent)."""
    global _registered
    if not _registered:
        _registered = True
        atexit.register(_drop_last_exception)


def _drop_last_exception() -> None:
    for name in ("last_exc", "last_value", "last_traceback", "last_type"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()
