"""Docs and README show only public imports, so every example survives internal moves."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import statecore

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Packages whose ``__init__`` is a curated public face.
PUBLIC = re.compile(r"^statecore(\.workflow|\.web|\.integrations\.[a-z_]+)?$")
CODE_BLOCK = re.compile(r"```(?:python|py)\n(.*?)```", re.S)
ONE_LINER = re.compile(r'python[\w.]* -c "([^"]*)"')
PARSE_FLAGS = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


def _statecore_imports(doc: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every statecore import in the doc's Python code."""
    text = doc.read_text()
    found = []
    for code in CODE_BLOCK.findall(text) + ONE_LINER.findall(text):
        tree = compile(code, str(doc), "exec", flags=PARSE_FLAGS)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("statecore"):
                found.append((node.module or "", [alias.name for alias in node.names]))
            elif isinstance(node, ast.Import):
                found += [(a.name, []) for a in node.names if a.name.startswith("statecore")]
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_in_docs_imports_only_public_statecore_names(doc: Path) -> None:
    imports = _statecore_imports(doc)
    private = [module for module, _ in imports if not PUBLIC.match(module)]
    assert not private, f"{doc.name} imports from non-public modules: {private}"
    unexported = [
        name
        for module, names in imports
        if module == "statecore"
        for name in names
        if name not in statecore.__all__
    ]
    assert not unexported, f"{doc.name} imports names statecore does not export: {unexported}"
