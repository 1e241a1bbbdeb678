"""The separate environment the side-by-side benchmark runs Temporal's official integration in.

``temporalio-openai-agents`` and the ``openai-agents`` version it pins never enter statecore's
own environment: they go into ``.cache/venv-official``, built from the package registry with
pinned versions. ``scripts/setup.sh test`` builds it (so tests never download), and the
benchmark builds it if it is missing.

    .venv/bin/python bench/official_venv.py          # build it (or check it is current)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".cache" / "venv-official"
#: temporalio-openai-agents 1.1.0 requires openai-agents>=0.22,<0.23: the newest of those.
PINNED = ("temporalio-openai-agents==1.1.0", "openai-agents==0.22.3")
#: Longest the build may take (a cold package cache on a slow link).
BUILD_TIMEOUT_SECONDS = 900
_MARKER = VENV / "statecore-bench-pins.txt"


def requirements() -> list[str]:
    """The pins, and the temporalio statecore runs with, so both sides use the same SDK."""
    return [*PINNED, f"temporalio=={metadata.version('temporalio')}"]


def official_python() -> Path | None:
    """The environment's Python if it is built with the current pins, else None."""
    python = VENV / "bin" / "python"
    if not python.exists() or not _MARKER.exists():
        return None
    return python if _MARKER.read_text().split() == requirements() else None


def build() -> Path:
    """Build (or rebuild) the environment; returns its Python. Raises on failure."""
    found = official_python()
    if found is not None:
        return found
    shutil.rmtree(VENV, ignore_errors=True)
    VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "venv", str(VENV)], check=True, timeout=BUILD_TIMEOUT_SECONDS
    )
    python = VENV / "bin" / "python"
    uv = Path(sys.executable).parent / "uv"  # scripts/setup.sh installs uv beside Python
    if uv.exists():
        install = [str(uv), "pip", "install", "--quiet", "--python", str(python)]
    else:
        install = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*install, *requirements()], check=True, timeout=BUILD_TIMEOUT_SECONDS)
    _MARKER.write_text("\n".join(requirements()) + "\n")
    return python


if __name__ == "__main__":
    print(build())
