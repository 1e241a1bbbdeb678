"""Every shipped workflow replays its committed histories: a code change that would break
running sessions fails here (guard such changes with workflow.patched)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from statecore.agent_session import WORKFLOWS
from statecore.temporal._plugin import workflow_runner

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_committed() -> None:
    names = {p.name.split("-run")[0] for p in HISTORIES}
    assert {"turns", "operator", "continued", "summarized"} <= names
    assert any(p.name == "continued-run3.json" for p in HISTORIES)
    # Each workflow.patched change: recorded before it (legacy-*) and after it (control-*),
    # by tests/temporal/record_control_histories.py.
    control = {
        "reset-empty",
        "drain-pause",
        "drain-close",
        "cancelled",
        "misnamed",
        "sparse-turns",
        "idle-continue",
    }
    assert {f"legacy-{name}" for name in control} <= names
    assert {f"control-{name}" for name in control} <= names


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays(path: Path) -> None:
    data = json.loads(path.read_text())
    history = WorkflowHistory.from_json(f"replay-{path.stem}", data)
    replayer = Replayer(
        workflows=WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
