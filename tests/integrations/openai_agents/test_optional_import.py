"""The SDK is optional: statecore imports without it, the integration says which extra to
install, and the plugin refuses what cannot run a turn."""

from __future__ import annotations

import subprocess
import sys

import pytest

from statecore.temporal._plugin import StatecorePlugin


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_statecore_imports_no_framework() -> None:
    done = run(
        "import sys, statecore; from statecore import StatecorePlugin, AgentSessionClient; "
        "assert 'agents' not in sys.modules and 'statecore.integrations.openai_agents' "
        "not in sys.modules, sorted(m for m in sys.modules if 'agents' in m)"
    )
    assert done.returncode == 0, done.stderr


def test_without_the_sdk_the_integration_names_its_extra() -> None:
    # A None entry in sys.modules makes `import agents` fail as if it were not installed.
    done = run(
        "import sys; sys.modules['agents'] = None\n"
        "try:\n"
        "    import statecore.integrations.openai_agents\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'statecore[openai-agents]'" in done.stdout


@pytest.mark.parametrize(
    ("agents", "message"),
    [
        ({"desk": object()}, "pass an agents.Agent"),
        ({"bad name": object()}, "agent name"),
        (["desk"], "mapping"),
    ],
)
def test_the_plugin_refuses_what_cannot_run_a_turn(agents: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StatecorePlugin("memory://", agents=agents)  # type: ignore[arg-type]
