"""The examples of docs/langgraph.md run as written, each a program of its own, and print
what the doc says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "langgraph.md"


def test_the_examples_run(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    # The third, a graph as a statecore turn, needs a Temporal server: tests/temporal/
    # test_langgraph_turns.py checks what it prints.
    assert len(blocks) == 3
    printed = []
    for number, code in enumerate(blocks[:2], start=1):
        script = tmp_path / f"example{number}.py"
        script.write_text(code)
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        printed.append(proc.stdout.strip())
    # The async form answers the first message; the sync form, its own thread's.
    assert printed == ["you said: hello", "you said: again"]
    assert (tmp_path / "langgraph-demo.db").exists()
    assert (tmp_path / "langgraph-sync-demo.db").exists()
