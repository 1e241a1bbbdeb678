"""A dev worker whose dev server disappears says so once and exits, instead of a screen of
connection retries (``worker.py --dev``, what ``scripts/dev.sh`` execs)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from statecore.temporal._devserver import free_port
from tests.temporal.test_dev_second_copy import dev_copy
from tests.temporal.test_worker_lifecycle import NEXT_STEPS, running

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def test_a_dev_worker_whose_server_is_killed_says_so_once_and_exits(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    with running(dev_copy(data, port), tmp_path / "dev.log") as dev:
        dev.wait_for(NEXT_STEPS)
        server_pid = json.loads((data / "temporal.pid").read_text())["pid"]
        os.kill(server_pid, signal.SIGKILL)
        dev.stopped_within(45)
        assert dev.popen.returncode not in (0, None)
        text = dev.text()
        after = text.split(NEXT_STEPS, 1)[1]
        assert after.count(f"(PID {server_pid}) exited") == 1, after
        assert "start scripts/dev.sh again" in after
        assert after.lower().count("connection refused") <= 3, after
