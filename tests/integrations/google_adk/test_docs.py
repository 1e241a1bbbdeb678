"""The examples of docs/google_adk.md run as written, each a program of its own, and print
what the doc says they print. (The third needs a Temporal server: tests/temporal/
test_adk_docs_turn.py runs it.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "google_adk.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def run_block(code: str, folder: Path, name: str) -> str:
    script = folder / f"{name}.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=folder, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_standalone_examples_print_what_the_doc_says(tmp_path: Path) -> None:
    blocks = python_blocks()
    assert len(blocks) == 3
    printed = run_block(blocks[0], tmp_path, "service")
    shown = re.search(r"It prints:\n\n```\n(.*?)```", DOC.read_text(), re.S)
    assert shown is not None
    assert printed == shown.group(1)
    assert run_block(blocks[1], tmp_path, "agent").split("\n")[:2] == [
        'You said: "hello"',
        "2 events",
    ]
    assert (tmp_path / "adk-sessions.db").exists() and (tmp_path / "adk-agent.db").exists()


def test_the_offline_model_answers_the_newest_user_text_and_calls_no_tool() -> None:
    import asyncio

    from google.adk.models.llm_request import LlmRequest
    from google.genai import types

    from statecore.integrations.google_adk import OfflineLlm

    request = LlmRequest(
        contents=[
            types.Content(role="user", parts=[types.Part(text="first")]),
            types.Content(role="model", parts=[types.Part(text="ok")]),
            types.Content(role="user", parts=[types.Part(text="second"), types.Part(text="ask")]),
        ]
    )

    async def answers() -> list[str]:
        out = []
        async for response in OfflineLlm().generate_content_async(request):
            assert response.content is not None and response.content.parts
            assert not any(p.function_call for p in response.content.parts)
            out.append(response.content.parts[0].text or "")
        return out

    assert asyncio.run(answers()) == ['You said: "second ask"']
