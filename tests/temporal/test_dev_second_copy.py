"""A second ``scripts/dev.sh`` (``worker.py --dev``, what the script execs) on the same port
refuses, naming the first copy's PIDs: a server whose worker is alive is in use, not left
over, and the first copy keeps serving."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from statecore.temporal._devserver import free_port
from tests.temporal.test_worker_lifecycle import NEXT_STEPS, running
from tests.worker_cli import REPO

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def dev_copy(data: Path, port: int) -> list[str]:
    return [
        sys.executable,
        str(REPO / "worker.py"),
        "--dev",
        "--port",
        str(port),
        "--ui-port",
        "0",
        "--data-dir",
        str(data),
        "--database-url",
        f"sqlite+aiosqlite:///{data / 'statecore.db'}",
    ]


def test_a_second_dev_copy_refuses_instead_of_stopping_the_live_one(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    with running(dev_copy(data, port), tmp_path / "first.log") as first:
        first.wait_for(NEXT_STEPS)
        with running(dev_copy(data, port), tmp_path / "second.log") as second:
            second.stopped_within(60)
        assert second.popen.returncode != 0
        text = " ".join(second.text().split())
        assert f"port {port} is held by the dev server" in text, text
        assert f"that is still running (PID {first.popen.pid})" in text, text
        assert "--ui-port" in text and "TEMPORAL_ADDRESS" in text
        assert "stopping it" not in text
        assert first.popen.poll() is None, "the first copy was stopped"
        assert "Connection refused" not in first.text()
