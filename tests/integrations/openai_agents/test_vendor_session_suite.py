"""The OpenAI Agents SDK's own session tests, run against StatecoreSession on every SQL backend.

The tests come from the pinned openai-agents sdist, unpacked by scripts/vendor_tests.sh at
setup time (never downloaded here). They run in a child pytest in the sdist's directory with
statecore_vendor_plugin substituting the session class; exclusions are listed there and in
docs/openai_agents.md with their reasons.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dbs import fresh_database

ROOT = Path(__file__).resolve().parents[3]
VENDOR = ROOT / ".cache" / "vendor" / "openai-agents-0.24.0"
SUITES = [
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/memory/test_session_context_wrapper.py",
    "tests/extensions/memory/test_sqlalchemy_session.py",
]
#: Tests the four files hold, and how many of them the plugin deselects.
COLLECTED, EXCLUDED = 129, 42
#: The child run's own limit: it takes about 20 s on SQLite.
CHILD_TIMEOUT_SECONDS = 600


@pytest.mark.slow
@pytest.mark.parametrize(
    "dialect",
    [
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", id="mariadb", marks=pytest.mark.mariadb),
    ],
)
async def test_the_sdk_session_suite_passes_on_statecore(dialect: str) -> None:
    if not (VENDOR / "tests" / "memory").is_dir():
        pytest.fail(f"{VENDOR} is missing: run `bash scripts/setup.sh test` (it fetches it)")
    async with fresh_database(dialect, "oaivendor") as url:
        env = {
            **os.environ,
            "STATECORE_VENDOR_DATABASE_URL": url,
            "PYTHONPATH": str(Path(__file__).parent),
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "statecore_vendor_plugin",
                "-c",
                os.devnull,
                "--rootdir",
                ".",
                "-q",
                "-p",
                "no:cacheprovider",
                *SUITES,
            ],
            cwd=VENDOR,
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_SECONDS,
        )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    counts = {
        kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|deselected|error)", summary)
    }
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert counts == {"passed": COLLECTED - EXCLUDED, "deselected": EXCLUDED}, summary
