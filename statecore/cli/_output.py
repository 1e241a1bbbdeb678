"""What the ``statecore`` command prints: JSON for programs, rich tables for people.

Results go to stdout, errors and progress to stderr, so ``--json`` output and exported
bundles can be piped while messages still reach the terminal.
"""

from __future__ import annotations

import errno
import json
import sys
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from statecore.core._models import StateOperationResult

#: Width of tables written to a pipe or file (rich would otherwise wrap them at 80 columns).
PIPE_WIDTH = 160


class _Console(Console):
    """rich's Console, except that a closed pipe is left to ``statecore.cli._closed_pipe``
    (rich would exit with status 1 itself)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader of this command's output went away")


def stdout() -> Console:
    return _Console(highlight=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def stderr() -> Console:
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else PIPE_WIDTH)


def jsonable(data: Any) -> Any:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, list):
        return [jsonable(item) for item in data]
    return data


def print_json(data: Any, *, compact: bool = False) -> None:
    """One JSON document on stdout (``compact``: on one line, for JSON-lines streams)."""
    text = json.dumps(jsonable(data), indent=None if compact else 2, ensure_ascii=False)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def print_error(code: str, message: str, exit_code: int, *, as_json: bool) -> None:
    if as_json:
        payload = {"error": {"code": code, "message": message}, "exit_code": exit_code}
        sys.stderr.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        sys.stderr.write(f"statecore: error: {message}\n")
    sys.stderr.flush()


def print_note(message: str) -> None:
    """A human remark on stderr (kept out of piped output)."""
    stderr().print(message, markup=False)


def stores_table(report: StateOperationResult) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("store", "exists", "items", "tokens", "details"):
        table.add_column(column, justify="right" if column in ("items", "tokens") else "left")
    for store in report.stores:
        # Scalars worth reading; unset flags and timestamps only make the table wide.
        details = ", ".join(
            f"{key}={value}"
            for key, value in store.metadata.items()
            if value not in (None, False)
            and not isinstance(value, dict | list)
            and key not in ("last_accessed", "created_at")
        )
        table.add_row(
            store.name,
            "yes" if store.exists else "no",
            str(store.items),
            "" if store.tokens is None else str(store.tokens),
            details,
        )
    return table


def print_report(report: StateOperationResult, *, title: str) -> None:
    """A describe/reset/compact/import report as a short header and a table of stores."""
    out = stdout()
    out.print(title, markup=False)
    checkpoint = getattr(report, "checkpoint", None)
    if checkpoint is not None:
        paused = f" ({checkpoint.pause_reason})" if checkpoint.pause_reason else ""
        out.print(
            f"  status {checkpoint.status}{paused}, turn {checkpoint.turn}, "
            f"runs {checkpoint.runs}, compactions {checkpoint.compactions}, "
            f"tokens {checkpoint.token_total}",
            markup=False,
        )
        if checkpoint.last_operation:
            out.print(f"  last operation: {checkpoint.last_operation}", markup=False)
    for label, names in (
        ("cleared", report.cleared),
        ("compacted", report.compacted),
        ("missing", report.missing),
        ("errors", report.errors),
    ):
        if names:
            out.print(f"  {label}: {', '.join(names)}", markup=False)
    if report.stores:
        out.print(stores_table(report))
    for rejection in getattr(report, "rejections", []):
        out.print(
            f"  rejected {rejection.operation} at turn {rejection.turn}: "
            f"{rejection.code}: {rejection.message}",
            markup=False,
        )


def print_rows(rows: list[dict[str, Any]], columns: list[str], *, empty: str) -> None:
    out = stdout()
    if not rows:
        out.print(empty, markup=False)
        return
    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column.replace("_", " "))
    for row in rows:
        table.add_row(*("" if row.get(c) is None else str(row[c]) for c in columns))
    out.print(table)
