"""Running a side-by-side benchmark in quick mode from a test, and reading its result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_quick(script: str, folder: Path, turns: int, *extra: str) -> dict:
    """``bench/<script> --quick --turns N`` writing into ``folder``; its JSON result, once its
    figure is there too."""
    out = folder / Path(script).with_suffix(".json").name
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--quick",
         "--turns", str(turns), "--out", str(out), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert out.with_suffix(".png").stat().st_size > 10_000
    return json.loads(out.read_text())
