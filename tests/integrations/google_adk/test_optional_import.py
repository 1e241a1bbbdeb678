"""ADK is optional: statecore imports without it, and the integration names its extra."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_statecore_imports_no_adk() -> None:
    done = run(
        "import sys, statecore; from statecore import StatecorePlugin, AgentSessionClient\n"
        "import statecore.temporal._plugin, statecore.store\n"
        "assert not [m for m in sys.modules if m.startswith('google.adk') "
        "or m.startswith('statecore.integrations.google_adk')], 'google.adk imported'"
    )
    assert done.returncode == 0, done.stderr


def test_without_adk_the_integration_names_its_extra() -> None:
    done = run(
        "import sys; sys.modules['google.adk'] = None\n"
        "try:\n"
        "    import statecore.integrations.google_adk\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'statecore[google-adk]'" in done.stdout
