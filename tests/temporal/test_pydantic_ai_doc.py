"""The examples of docs/pydantic_ai.md run as written, each a program of its own (the second
against a real Temporal dev server), and print what the doc says they print."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from statecore.temporal._devserver import DevServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "pydantic_ai.md"


async def test_the_examples_run(dev_server: DevServer, tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 2
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "STATECORE_"))},
        "TEMPORAL_ADDRESS": dev_server.address,
    }
    printed = []
    for number, code in enumerate(blocks, start=1):
        script = tmp_path / f"example{number}.py"
        script.write_text(code)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 300)
        assert proc.returncode == 0, err.decode()[-3000:]
        printed.append(out.decode().strip().splitlines())
    assert printed == [["2 1", "conflict: load it again", "True"], ["1 Forecast: snow"]]
    assert (tmp_path / "pydantic-ai-demo.db").exists()
    assert (tmp_path / "pydantic-ai-turns.db").exists()
