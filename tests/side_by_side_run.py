"""Running a side-by-side benchmark in quick mode from a test, and reading its result; all as
processes (``python -m bench...``): tests never import bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def official_environment_built(name: str) -> bool:
    """Whether the official integration's separate environment ``name`` (``openai-agents``,
    ``langgraph``, ``pydantic-ai``, ``google-adk``) is built with its current pins."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.harness.official_venv", "--check", name],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode == 0


def run_quick(name: str, folder: Path, turns: int, *extra: str) -> dict:
    """``python -m bench.<name> --quick --turns N`` writing into ``folder``; its JSON result,
    once its figure is there too."""
    out = folder / f"{name}.json"
    proc = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", "--quick",
         "--turns", str(turns), "--out", str(out), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert out.with_suffix(".png").stat().st_size > 10_000
    return json.loads(out.read_text())
