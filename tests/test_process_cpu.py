"""The benchmarks' CPU readings (bench/harness/process_cpu.py): a PostgreSQL backend's work is
seen to the nanosecond, and agrees with the kernel's clock-tick count of the same process.
The checks live with the harness (``python -m bench.harness.checks cpu``); tests run them as a
process and never import bench."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.dbs import fresh_database

ROOT = Path(__file__).resolve().parents[1]


def run_check(*extra: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.harness.checks", "cpu", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok cpu"


def test_a_single_threaded_process_reads_the_same_in_nanoseconds_and_in_ticks() -> None:
    run_check()


@pytest.mark.postgres
async def test_a_few_milliseconds_of_a_backends_work_are_counted() -> None:
    async with fresh_database("postgresql", "cpu") as url:
        run_check("--postgres-url", url)
