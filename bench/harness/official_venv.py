"""The separate environments the side-by-side benchmarks run Temporal's official integrations in.

Temporal's integrations and the framework versions they pin never enter statecore's own
environment: each goes into its own folder under ``.cache``, built from the package registry
with pinned versions, and runs as a subprocess with that folder's Python:

- ``OPENAI_AGENTS``: ``temporalio-openai-agents`` and its ``openai-agents``, in
  ``.cache/venv-official`` (``bench/openai_agents_side_by_side.py``);
- ``LANGGRAPH``: ``temporalio-langgraph`` and its ``langgraph``, in
  ``.cache/venv-official-langgraph`` (``bench/langgraph_side_by_side.py``);
- ``PYDANTIC_AI``: ``pydantic-ai-slim[temporal]`` (``pydantic_ai.durable_exec.temporal``), in
  ``.cache/venv-official-pydantic-ai`` (``bench/pydantic_ai_side_by_side.py``).
- ``GOOGLE_ADK``: ``temporalio-google-adk`` and its ``google-adk``, in
  ``.cache/venv-official-google-adk`` (``bench/google_adk_side_by_side.py``).

``scripts/setup.sh test`` builds them all (so tests never download), and each benchmark builds its
own if it is missing.

    .venv/bin/python -m bench.harness.official_venv               # build all that are missing
    .venv/bin/python -m bench.harness.official_venv langgraph     # build one
    .venv/bin/python -m bench.harness.official_venv --check       # only say which are built
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Longest a build may take (a cold package cache on a slow link).
BUILD_TIMEOUT_SECONDS = 900
_MARKER_NAME = "statecore-bench-pins.txt"


@dataclass(frozen=True)
class OfficialEnvironment:
    """One integration's environment: where it lives and what is pinned in it."""

    name: str
    folder: Path
    pins: tuple[str, ...]

    def requirements(self) -> list[str]:
        """The pins, and the temporalio statecore runs with, so both sides use the same SDK."""
        return [*self.pins, f"temporalio=={metadata.version('temporalio')}"]

    def python(self) -> Path | None:
        """The environment's Python if it is built with the current pins, else None."""
        python = self.folder / "bin" / "python"
        marker = self.folder / _MARKER_NAME
        if not python.exists() or not marker.exists():
            return None
        return python if marker.read_text().split() == self.requirements() else None

    def build(self) -> Path:
        """Build (or rebuild) the environment; returns its Python. Raises on failure."""
        found = self.python()
        if found is not None:
            return found
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "venv", str(self.folder)],
            check=True,
            timeout=BUILD_TIMEOUT_SECONDS,
        )
        python = self.folder / "bin" / "python"
        uv = Path(sys.executable).parent / "uv"  # scripts/setup.sh installs uv beside Python
        if uv.exists():
            install = [str(uv), "pip", "install", "--quiet", "--python", str(python)]
        else:
            install = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*install, *self.requirements()], check=True, timeout=BUILD_TIMEOUT_SECONDS)
        (self.folder / _MARKER_NAME).write_text("\n".join(self.requirements()) + "\n")
        return python


OPENAI_AGENTS = OfficialEnvironment(
    "openai-agents",
    ROOT / ".cache" / "venv-official",
    # temporalio-openai-agents 1.1.0 requires openai-agents>=0.22,<0.23: the newest of those.
    ("temporalio-openai-agents==1.1.0", "openai-agents==0.22.3"),
)
LANGGRAPH = OfficialEnvironment(
    "langgraph",
    ROOT / ".cache" / "venv-official-langgraph",
    # temporalio-langgraph 0.1.0 (the only release) requires langgraph>=1.2.0 and
    # langchain-core>=0.3.0: the versions that resolved when the benchmark was written.
    ("temporalio-langgraph==0.1.0", "langgraph==1.2.24", "langchain-core==1.8.3"),
)
PYDANTIC_AI = OfficialEnvironment(
    "pydantic-ai",
    ROOT / ".cache" / "venv-official-pydantic-ai",
    # Pydantic AI's own Temporal integration (pydantic_ai.durable_exec.temporal) ships in
    # pydantic-ai-slim; its temporal extra adds temporalio. The release statecore pins.
    ("pydantic-ai-slim[temporal]==2.68.0",),
)
GOOGLE_ADK = OfficialEnvironment(
    "google-adk",
    ROOT / ".cache" / "venv-official-google-adk",
    # temporalio-google-adk 0.0.1 (a pre-release, the only one) on the ADK release statecore's
    # own google-adk extra pins.
    ("temporalio-google-adk==0.0.1", "google-adk==2.13.0"),
)
ENVIRONMENTS = {env.name: env for env in (OPENAI_AGENTS, LANGGRAPH, PYDANTIC_AI, GOOGLE_ADK)}

#: What statecore's storage driver (``StatecoreBlobPlugin``) imports besides temporalio and
#: pydantic, at the versions statecore runs with.
BLOB_DRIVER_PACKAGES = ("sqlalchemy", "greenlet", "aiosqlite", "alembic", "tiktoken")


def with_blob_driver(env: OfficialEnvironment) -> OfficialEnvironment:
    """``env`` plus what statecore's storage driver needs, in a folder of its own (the
    integration's own environment stays as it is): ``bench/official_blobs.py`` runs the
    official integration with ``StatecoreBlobPlugin`` from the repository in it."""
    extra = tuple(f"{name}=={metadata.version(name)}" for name in BLOB_DRIVER_PACKAGES)
    return OfficialEnvironment(
        f"{env.name}-blobs", env.folder.with_name(env.folder.name + "-blobs"), env.pins + extra
    )


def main(argv: list[str] | None = None) -> int:
    """Build the named environments (all by default), or with ``--check`` only say whether
    each is built with its current pins (exit status 1 when one is not)."""
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("names", nargs="*", metavar="NAME", help=", ".join(ENVIRONMENTS))
    p.add_argument("--check", action="store_true", help="build nothing; report and exit")
    a = p.parse_args(argv)
    names = a.names or list(ENVIRONMENTS)
    unknown = [n for n in names if n not in ENVIRONMENTS]
    if unknown:
        p.error(f"unknown environment {unknown}; choose from {list(ENVIRONMENTS)}")
    missing = []
    for name in names:
        env = ENVIRONMENTS[name]
        python = env.python() if a.check else env.build()
        print(f"{name}: {python or 'not built (or not with the current pins)'}")
        if python is None:
            missing.append(name)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
