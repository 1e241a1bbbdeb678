"""A dev worker whose Temporal dev server disappears says so once and stops.

Without this, the worker's pollers retry the vanished server for ever, a screen of
"connection refused" a minute. The worker started the server, so it watches the process:
when the server exits (killed, crashed, stopped by hand), the worker stops and ends with one
error line naming the server, its exit status and its log.
"""

from __future__ import annotations

import asyncio

from statecore.core._errors import StatecoreError
from statecore.temporal._devserver import DevServer

#: How often the worker checks that its dev server still runs.
WATCH_EVERY_SECONDS = 0.5


class DevServerGoneError(StatecoreError):
    """The dev server this worker started has exited."""

    code = "DevServerGone"


async def watch_dev_server(server: DevServer, stop: asyncio.Event) -> str:
    """Once ``server`` exits, set ``stop`` and return what happened."""
    process = server.process
    assert process is not None, "the dev server was not started"
    # A Popen has no awaitable exit, and a thread blocked in wait() could not be cancelled.
    while (status := process.poll()) is None:  # noqa: ASYNC110
        await asyncio.sleep(WATCH_EVERY_SECONDS)
    text = (
        f"the Temporal dev server on {server.address} (PID {process.pid}) exited with status "
        f"{status}; its log is {server.log_path}. The worker stops: start scripts/dev.sh again"
    )
    stop.set()  # the worker stops, and raises DevServerGoneError with this text: said once
    return text
