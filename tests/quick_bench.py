"""A benchmark of bench/ run in quick mode by a smoke test (``python -m bench.<name>``, a
process: tests never import bench), and the result it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_quick_bench(name: str, folder: Path) -> tuple[dict[str, Any], str]:
    """``python -m bench.<name> --quick``, writing into ``folder``: its JSON result and its stdout.

    The run must succeed and draw its chart beside the result (a PNG of some substance)."""
    out = folder / f"{name}.json"
    proc = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert out.with_suffix(".png").stat().st_size > 10_000
    return result, proc.stdout
