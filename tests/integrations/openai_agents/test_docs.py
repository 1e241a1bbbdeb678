"""The standalone examples of docs/openai_agents.md run as written, each a program of its
own. (The one marked as an excerpt needs a Temporal server: tests/temporal/
test_openai_agent_turns.py checks it.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "openai_agents.md"
BLOCK = re.compile(r"(<!-- excerpt[^>]*-->\n)?```python\n(.*?)```", re.S)


def test_the_standalone_examples_run(tmp_path: Path) -> None:
    # The page's standalone examples need no Temporal; its durable-turn example does, and
    # tests/temporal/test_docs_run.py runs that one against a dev server.
    blocks = [
        code
        for excerpt, code in BLOCK.findall(DOC.read_text())
        if not excerpt and "temporalio" not in code
    ]
    assert len(blocks) == 2
    printed = []
    for number, code in enumerate(blocks, start=1):
        script = tmp_path / f"example{number}.py"
        script.write_text(code)
        proc = subprocess.run(
            [sys.executable, "-W", "error::RuntimeWarning", str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "never awaited" not in proc.stderr
        printed.append(proc.stdout.strip().splitlines())
    assert printed[0][-1].startswith("{'type': 'function_call_output'")
    assert printed[1] == ["0 items so far"]
    assert (tmp_path / "agents.db").exists() and (tmp_path / "conversations.db").exists()
