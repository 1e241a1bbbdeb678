"""A reader that goes away is not an error: ``statecore events --json | head -1``.

When the program reading a command's output closes the pipe (``head``, a pager quit early),
the next write raises BrokenPipeError. That is the reader's choice, not an outage: the
command ends quietly with exit code 0, without an error line (which would go nowhere useful,
or into the same closed pipe) and without Python's "Exception ignored ... BrokenPipeError"
when the interpreter flushes stdout on the way out.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys


def is_closed_pipe(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an error it was raised from, is a write to this program's own
    closed output. A broken pipe to anything else (a database's socket) is not: it keeps
    its error and exit code."""
    return _raised_by_epipe(exc) and reader_gone()


def reader_gone() -> bool:
    """Whether stdout is a pipe (or socket) whose reading end has been closed."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        events = poller.poll(0)
    except (OSError, ValueError, AttributeError):
        return False
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events)


def _raised_by_epipe(exc: BaseException | None) -> bool:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, BrokenPipeError) or (
            isinstance(exc, OSError) and exc.errno == errno.EPIPE
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that nothing written or flushed later fails again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
