"""LangGraph is an optional extra: statecore imports without it, and the integration says
how to install it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK_LANGGRAPH = textwrap.dedent(
    """
    import sys

    class NoLangGraph:
        def find_spec(self, name, path=None, target=None):
            if name == "langgraph" or name.startswith("langgraph."):
                raise ImportError(f"No module named {name!r} (blocked)")
            return None

    sys.meta_path.insert(0, NoLangGraph())
    import statecore, statecore.store, statecore.store.sql, statecore.integrations
    assert not any(m.startswith("langgraph") for m in sys.modules), "statecore loaded langgraph"
    try:
        import statecore.integrations.langgraph
    except ImportError as exc:
        print(exc)
    else:
        raise SystemExit("the integration imported without langgraph")
    """
)


def test_statecore_imports_without_langgraph_and_the_integration_says_what_to_install() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK_LANGGRAPH], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pip install 'statecore[langgraph]'" in proc.stdout
