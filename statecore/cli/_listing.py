"""``statecore sessions list``: sessions found through Temporal visibility.

The AgentSession workflow keeps the search attributes StatecoreAgentId, StatecoreSessionId and
StatecoreStatus current, so listing needs neither a worker nor the database. StatecoreTurn is
the turn as of its last upsert: exact after a status change or a new run, otherwise written
on the first turn and every TURN_SEARCH_ATTRIBUTE_EVERY turns (the exact turn would cost a
query per session, answered by a worker). Visibility is eventually consistent: a change shows
up here within about a second.
"""

from __future__ import annotations

import argparse
from typing import Any

from statecore.cli._args import identifier, new_command, positive_int
from statecore.cli._output import print_json, print_rows
from statecore.cli._settings import Settings
from statecore.contract._session import (
    SA_AGENT_ID,
    SA_SESSION_ID,
    SA_STATUS,
    SA_TURN,
    WORKFLOW_TYPE,
)
from statecore.core._models import DEFAULT_NAMESPACE

STATUSES = ("active", "paused", "draining", "closed")
COLUMNS = [
    "namespace",
    "agent_id",
    "session_id",
    "status",
    "turn",
    "execution",
    "task_queue",
    "started_at",
]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = new_command(commands, "sessions", "find sessions")
    sub = group.add_subparsers(dest="sessions_command", metavar="COMMAND", required=True)
    p = new_command(
        sub,
        "list",
        "list sessions (newest run of each); --state-namespace limits them to one tenant",
    )
    p.add_argument("--status", choices=STATUSES, help="only sessions in this status")
    p.add_argument("--agent", type=identifier, metavar="AGENT", help="only this agent's sessions")
    p.add_argument("--limit", type=positive_int, default=1000, metavar="N")
    p.set_defaults(run=list_sessions)


def visibility_query(*, agent: str | None, status: str | None) -> str:
    """The list filter. Values are validated identifiers or fixed words, so quoting them is
    safe. Runs that continued as new are left out: the newest run stands for the session."""
    clauses = [f"WorkflowType = '{WORKFLOW_TYPE}'", "ExecutionStatus != 'ContinuedAsNew'"]
    if agent is not None:
        clauses.append(f"{SA_AGENT_ID} = '{agent}'")
    if status is not None:
        clauses.append(f"{SA_STATUS} = '{status}'")
    return " AND ".join(clauses)


def namespace_of(workflow_id: str) -> str:
    """The statecore namespace a session's workflow id names (see ``workflow_id_for``:
    ``agent-session:{agent}:{session}`` in the default namespace,
    ``agent-session:{namespace}:{agent}:{session}`` in any other)."""
    parts = workflow_id.split(":")
    return parts[1] if len(parts) == 4 else DEFAULT_NAMESPACE


async def list_sessions(args: argparse.Namespace, settings: Settings) -> int:
    from temporalio.common import SearchAttributeKey

    keys = {
        "agent_id": SearchAttributeKey.for_keyword(SA_AGENT_ID),
        "session_id": SearchAttributeKey.for_keyword(SA_SESSION_ID),
        "status": SearchAttributeKey.for_keyword(SA_STATUS),
        "turn": SearchAttributeKey.for_int(SA_TURN),
    }
    client = await settings.temporal()
    query = visibility_query(agent=args.agent, status=args.status)
    newest: dict[str, Any] = {}

    async def collect() -> None:
        async for execution in client.list_workflows(query, limit=args.limit):
            seen = newest.get(execution.id)
            # A closed session that was reopened has a completed run and a running one.
            if seen is None or execution.start_time > seen.start_time:
                newest[execution.id] = execution

    await settings.answer(collect(), "the visibility query")
    rows = []
    for execution in newest.values():
        attributes = execution.typed_search_attributes
        row: dict[str, Any] = {name: attributes.get(key) for name, key in keys.items()}
        row.update(
            namespace=namespace_of(execution.id),
            workflow_id=execution.id,
            run_id=execution.run_id,
            execution=execution.status.name.lower() if execution.status else None,
            task_queue=execution.task_queue,
            started_at=execution.start_time.isoformat(timespec="seconds"),
            closed_at=execution.close_time.isoformat() if execution.close_time else None,
        )
        if settings.state_namespace in (None, row["namespace"]):
            rows.append(row)
    rows.sort(key=lambda r: (r["namespace"], r["agent_id"] or "", r["session_id"] or ""))
    if settings.json:
        print_json(rows)
    else:
        print_rows(rows, COLUMNS, empty="no sessions match")
    return 0
