"""The ``statecore`` command: run a dev stack, talk to sessions, operate, move and sweep them.

    statecore dev                               embedded Temporal dev server + worker
    statecore chat AGENT SESSION                one turn per line of stdin
    statecore sessions list [--status S] [--agent A]
    statecore describe|reset|compact|pause|resume|hint|migrate|close AGENT SESSION ...
    statecore export AGENT SESSION | --all      a portable bundle file (to -o FILE or stdout)
    statecore import FILE [--replace] [--as AGENT SESSION]
    statecore db upgrade                        create or upgrade the database schema
    statecore sweep                             delete state idle past its TTL

Global options (before or after the command): --address, --namespace (Temporal), --task-queue,
--database-url, --state-namespace (statecore tenant), --timeout, --json, --debug. docs/cli.md
has an example of every command.

Exit codes:
    0  ok
    1  any other error
    2  bad arguments (unknown option, malformed id, unknown store, unreadable bundle file)
    3  not found (no such session workflow, no state stored for the session)
    4  refused by the session (paused, closed, draining, conflict, import over a live session)
    5  cannot reach Temporal or the database (or no worker answered in time)
"""

from statecore.cli._app import main

__all__ = ["main"]
