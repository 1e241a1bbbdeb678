"""Worker logs that say which session and turn they are about.

Every record passing a handler set up by ``configure_logging`` carries ``session_id``,
``agent_id`` and ``turn_id`` (``None`` when the line is about no session):

- activities: ``SessionLogContext``, a worker interceptor, reads them from the activity's input
  (``input.ref`` and ``input.turn_id``, the shape statecore's activity inputs share), with the
  activity's type and workflow id, into a context variable that lives as long as the
  activity's task; the turn activities, which decode their raw input themselves, set it
  with ``log_with_input``;
- workflow code passes them with ``extra=`` (``workflow.logger`` adds the workflow's own ids);
- anything else may pass them with ``extra=`` too.

``--log-format json`` writes one JSON object per line with those fields plus the Temporal ids
(workflow id, run id, activity type, update id) that the SDK's log adapters attach.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from temporalio import activity, workflow
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

#: The record attributes every line gets.
CONTEXT_FIELDS = ("session_id", "agent_id", "turn_id")
#: Set on lines written inside an activity.
ACTIVITY_FIELDS = ("activity_type", "workflow_id")

# What the SDK's log adapters put on records, copied to JSON lines under these names.
_TEMPORAL_FIELDS = {
    "temporal_workflow": ("workflow_id", "run_id", "workflow_type", "update_id", "update_name"),
    "temporal_activity": ("activity_type", "activity_id", "attempt", "workflow_id", "run_id"),
}


@dataclass(frozen=True)
class LogContext:
    session_id: str | None = None
    agent_id: str | None = None
    turn_id: str | None = None
    activity_type: str | None = None
    workflow_id: str | None = None


_current: ContextVar[LogContext | None] = ContextVar("statecore_log_context", default=None)


def log_context_of(arg: Any) -> LogContext:
    """The ids an activity input names (``arg.ref``, a SessionRef, and ``arg.turn_id``)
    plus the running activity's type and workflow id."""
    ref = getattr(arg, "ref", None)
    turn_id = getattr(arg, "turn_id", None)
    info = activity.info() if activity.in_activity() else None
    return LogContext(
        session_id=getattr(ref, "session_id", None),
        agent_id=getattr(ref, "agent_id", None),
        turn_id=turn_id if isinstance(turn_id, str) else None,
        activity_type=info.activity_type if info else None,
        workflow_id=info.workflow_id if info else None,
    )


def log_with_input(arg: Any) -> None:
    """Name ``arg``'s session and turn in the running activity's log lines from now on: for
    an activity that takes its input raw and decodes it itself, which the interceptor below
    cannot read."""
    _current.set(log_context_of(arg))


class SessionLogContext(Interceptor):
    """Worker interceptor: log lines written while an activity runs name its session/turn."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityLogContext(next)


class _ActivityLogContext(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        token = _current.set(log_context_of(input.args[0] if input.args else None))
        try:
            return await super().execute_activity(input)
        finally:
            _current.reset(token)


class SessionContextFilter(logging.Filter):
    """Gives every record ``session_id``/``agent_id``/``turn_id``: what ``extra=`` passed,
    else the running activity's, else ``None``; inside an activity also its type and
    workflow id."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = _current.get()
        for name in CONTEXT_FIELDS:
            if getattr(record, name, None) is None:
                setattr(record, name, getattr(current, name) if current else None)
        if current is not None:
            for name in ACTIVITY_FIELDS:
                if getattr(record, name, None) is None:
                    setattr(record, name, getattr(current, name))
        return True


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message [session_id=.. agent_id=.. turn_id=..]``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = [f"{n}={v}" for n in CONTEXT_FIELDS if (v := getattr(record, n, None)) is not None]
        return f"{line} [{' '.join(ids)}]" if ids else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the session ids, Temporal ids."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            out[name] = getattr(record, name, None)
        for name in ACTIVITY_FIELDS:
            if (value := getattr(record, name, None)) is not None:
                out[name] = value
        for attr, fields in _TEMPORAL_FIELDS.items():
            details = getattr(record, attr, None)
            if isinstance(details, dict):
                out.update({f: details[f] for f in fields if f in details and f not in out})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(
    level: str = "INFO", log_format: LogFormat = "text", *, stream: TextIO | None = None
) -> logging.Handler:
    """Route all logging to one handler on ``stream`` (stderr) in the given format; returns it."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, not {log_format!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(SessionContextFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    logging.captureWarnings(True)  # warnings too come out as log lines in this format
    if log_format == "json":
        # JSON lines carry the workflow and activity ids as fields: no copy in the message.
        workflow.logger.workflow_info_on_message = False
        activity.logger.activity_info_on_message = False
    return handler
