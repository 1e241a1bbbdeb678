"""Pydantic AI is an optional extra: statecore imports without it, and the integration says how
to install it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK_PYDANTIC_AI = textwrap.dedent(
    """
    import sys

    class NoPydanticAI:
        def find_spec(self, name, path=None, target=None):
            if name == "pydantic_ai" or name.startswith("pydantic_ai."):
                raise ImportError(f"No module named {name!r} (blocked)")
            return None

    sys.meta_path.insert(0, NoPydanticAI())
    import statecore, statecore.store, statecore.store.sql, statecore.integrations
    import statecore.temporal._plugin
    assert not any(m.startswith("pydantic_ai") for m in sys.modules), "statecore loaded it"
    try:
        import statecore.integrations.pydantic_ai
    except ImportError as exc:
        print(exc)
    else:
        raise SystemExit("the integration imported without pydantic_ai")
    """
)


def test_statecore_imports_without_pydantic_ai_and_the_integration_says_what_to_install() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK_PYDANTIC_AI], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pip install 'statecore[pydantic-ai]'" in proc.stdout
