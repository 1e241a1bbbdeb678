"""The examples of docs/langgraph.md run as written (in order, in one namespace)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "langgraph.md"


def test_the_examples_run(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 2
    script = tmp_path / "example.py"
    script.write_text("\n".join(blocks))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "you said: hello"
    assert (tmp_path / "langgraph-demo.db").exists()
