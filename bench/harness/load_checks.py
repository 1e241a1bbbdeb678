"""What the load run checks afterwards: the SQL rows, the worker's memory and its metrics.

Every check reads what an operator could read: the database itself (plain SQL, not the
store's API), ``/proc/<pid>/status`` of the worker process, and the worker's Prometheus
endpoint (``worker.py --metrics-port``).
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.client import Client

#: Worker metrics that count something going wrong inside the worker; a client can see none
#: of them when a retry succeeds, so the run reports them next to the client's errors.
WORKER_FAILURE_METRICS = (
    "temporal_workflow_task_execution_failed",
    "temporal_activity_execution_failed",
    "temporal_local_activity_execution_failed",
    "temporal_local_activity_execution_cancelled",
    "temporal_workflow_failed",
    "statecore_rejections",
)


@dataclass
class SqlCheck:
    """How the stored log compares with the turns the clients were told were committed."""

    sessions_expected: int
    messages_expected: int
    sessions_found: int = 0
    messages_found: int = 0
    missing_turns: int = 0
    duplicated_turns: int = 0
    unexpected_turns: int = 0
    sessions_with_gaps: int = 0
    sessions_out_of_order: int = 0
    counter_mismatches: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.sessions_found == self.sessions_expected
            and self.messages_found == self.messages_expected
            and not (
                self.missing_turns
                or self.duplicated_turns
                or self.unexpected_turns
                or self.sessions_with_gaps
                or self.sessions_out_of_order
                or self.counter_mismatches
            )
        )


async def check_sql(url: str, agent_id: str, expected: dict[str, list[str]]) -> SqlCheck:
    """Every expected turn stored exactly once (a user message then an assistant message),
    seqs 1..n without gaps per session, turns in the order they were sent, and each
    session row's counters agreeing with its messages. ``expected``: session id -> turn ids."""
    check = SqlCheck(
        sessions_expected=len(expected),
        messages_expected=2 * sum(len(turns) for turns in expected.values()),
    )
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            sessions = (
                await conn.execute(
                    text(
                        "SELECT id, session_id, last_seq, message_count"
                        " FROM statecore_sessions WHERE agent_id = :agent"
                    ),
                    {"agent": agent_id},
                )
            ).all()
            rows = (
                await conn.execute(
                    text(
                        "SELECT m.session_pk, m.seq, m.turn_id, m.idx, m.role"
                        " FROM statecore_messages m ORDER BY m.session_pk, m.seq"
                    )
                )
            ).all()
    finally:
        await engine.dispose()

    by_pk: dict[int, list[Any]] = defaultdict(list)
    for row in rows:
        by_pk[row.session_pk].append(row)
    check.sessions_found = len(sessions)
    check.messages_found = len(rows)
    known = {s.id for s in sessions}
    if stray := sum(len(v) for pk, v in by_pk.items() if pk not in known):
        check.problems.append(f"{stray} messages belong to sessions of another agent")
    for s in sessions:
        _check_session(check, s, by_pk.get(s.id, []), expected.get(s.session_id))
    for session_id in expected.keys() - {s.session_id for s in sessions}:
        check.missing_turns += len(expected[session_id])
        check.problems.append(f"{session_id}: no session row")
    return check


def _check_session(check: SqlCheck, session: Any, rows: list[Any], turns: list[str] | None) -> None:
    name = session.session_id
    if turns is None:
        check.problems.append(f"{name}: a session nobody opened")
        check.unexpected_turns += len({r.turn_id for r in rows})
        return
    seqs = [r.seq for r in rows]
    if seqs != list(range(1, len(rows) + 1)):
        check.sessions_with_gaps += 1
        check.problems.append(f"{name}: seqs {seqs[:5]}... are not 1..{len(rows)}")
    per_turn: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for r in rows:
        per_turn[r.turn_id].append((r.idx, r.role))
    for turn_id in turns:
        stored = per_turn.get(turn_id, [])
        if len(stored) < 2:
            check.missing_turns += 1
            check.problems.append(f"{name}: turn {turn_id} has {len(stored)} of 2 messages")
        elif len(stored) > 2:
            check.duplicated_turns += 1
            check.problems.append(f"{name}: turn {turn_id} stored {len(stored)} messages")
        elif stored != [(0, "user"), (1, "assistant")]:
            check.problems.append(f"{name}: turn {turn_id} stored as {stored}")
            check.sessions_out_of_order += 1
    check.unexpected_turns += len(per_turn.keys() - set(turns))
    order = list(dict.fromkeys(r.turn_id for r in rows))
    if order != [t for t in turns if t in per_turn]:
        check.sessions_out_of_order += 1
        check.problems.append(f"{name}: turns stored in the order {order}")
    if session.message_count != len(rows) or session.last_seq != (seqs[-1] if seqs else 0):
        check.counter_mismatches += 1
        check.problems.append(
            f"{name}: session row says {session.message_count} messages, last seq "
            f"{session.last_seq}; the log has {len(rows)}"
        )


# --- the worker process ------------------------------------------------------------------------


def summarize_worker_log(path: Path) -> dict[str, Any]:
    """Records of the worker's JSON log by level, and the first distinct warnings and errors
    (with their exception's last line): what went wrong inside the worker, retried or not."""
    levels: Counter[str] = Counter()
    notable: dict[str, int] = {}
    other_lines = 0
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            other_lines += 1  # not statecore's logging (e.g. the Rust core's own output)
            continue
        levels[record["level"]] += 1
        if record["level"] in ("WARNING", "ERROR", "CRITICAL"):
            cause = (record.get("exception") or "").strip().splitlines()[-1:]
            key = f"{record['level']} {record['logger']}: {_shape(record['message'])}"
            key += f" ({_shape(cause[0])})" if cause else ""
            notable[key] = notable.get(key, 0) + 1
    return {
        "records_by_level": dict(levels),
        "other_lines": other_lines,
        "warnings_and_errors": [{"line": k, "count": n} for k, n in list(notable.items())[:15]],
    }


_IDS = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(:\d+)*")


def _shape(message: str) -> str:
    """A message without its run ids and trailing structured fields, so alike lines group."""
    return _IDS.sub("<run>", message).split(" {", 1)[0][:300]


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(port: int) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample on the worker's Prometheus endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        body = response.read().decode()
    samples = []
    for line in body.splitlines():
        m = _SAMPLE.match(line)
        if line and not line.startswith("#") and m:
            labels = dict(_LABEL.findall(m.group("labels") or ""))
            samples.append((m.group("name"), labels, float(m.group("value"))))
    return samples


def metric_total(samples: list[tuple[str, dict[str, str], float]], name: str) -> float:
    return sum(value for n, _, value in samples if n == name)


#: History events that record work lost and redone: a workflow task the server timed out or
#: the worker failed, an activity attempt that failed or timed out.
RETRY_EVENTS = (
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
)


async def history_retries(client: Client, workflow_ids: list[str]) -> dict[str, Any]:
    """Count RETRY_EVENTS in every session's history, by event type (the current run: a load
    run's sessions are far below the turns that move a session to a new run)."""
    wanted = {int(e): EventType.Name(e).removeprefix("EVENT_TYPE_").lower() for e in RETRY_EVENTS}
    counts = dict.fromkeys(wanted.values(), 0)
    timeouts: Counter[str] = Counter()
    where: list[str] = []
    limit = asyncio.Semaphore(8)

    async def one(workflow_id: str) -> None:
        async with limit:
            history = await client.get_workflow_handle(workflow_id).fetch_history()
        for event in history.events:
            if event.event_type not in wanted:
                continue
            name = wanted[event.event_type]
            counts[name] += 1
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                # SCHEDULE_TO_START: it waited too long on the worker's sticky queue and
                # was handed to the normal queue; START_TO_CLOSE: the worker took too long.
                kind = TimeoutType.Name(event.workflow_task_timed_out_event_attributes.timeout_type)
                timeouts[kind.removeprefix("TIMEOUT_TYPE_").lower()] += 1
            where.append(f"{workflow_id} event {event.event_id}: {name}")

    await asyncio.gather(*(one(w) for w in workflow_ids))
    return {
        "events": counts,
        "workflow_task_timeouts_by_type": dict(timeouts),
        "first": sorted(where)[:20],
    }


#: Worker histograms (milliseconds) that say where a turn waits: for a task slot or poller
#: (schedule-to-start) or inside the worker (execution).
WORKER_LATENCY_HISTOGRAMS = (
    "temporal_workflow_task_schedule_to_start_latency",
    "temporal_workflow_task_execution_latency",
    "temporal_activity_schedule_to_start_latency",
    "temporal_activity_execution_latency",
    "temporal_local_activity_execution_latency",
)


def worker_counters(samples: list[tuple[str, dict[str, str], float]]) -> dict[str, Any]:
    """Turns the worker committed, and every failure counter (by label set when nonzero)."""
    failures: dict[str, Any] = {}
    for name in WORKER_FAILURE_METRICS:
        found = [(labels, v) for n, labels, v in samples if n == name and v]
        failures[name] = {
            "total": sum(v for _, v in found),
            "by_labels": [
                {
                    **{k: v for k, v in labels.items() if k not in ("namespace", "service_name")},
                    "value": value,
                }
                for labels, value in found
            ],
        }
    means = {}
    for name in WORKER_LATENCY_HISTOGRAMS:
        count = metric_total(samples, f"{name}_count")
        total_ms = metric_total(samples, f"{name}_sum")
        means[name] = {"count": count, "mean_ms": round(total_ms / count, 1) if count else None}
    return {
        "statecore_turns": metric_total(samples, "statecore_turns"),
        "failures": failures,
        "latency_means": means,
    }
