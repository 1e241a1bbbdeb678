"""statecore/__init__.pyi, the type checkers' view of the lazily loaded public face, built
from ``statecore._EXPORTS``: ``python -m tests.public_stub`` writes it; tests/
test_public_api.py checks it is current."""

from __future__ import annotations

import sys
from itertools import groupby
from pathlib import Path

import statecore

STUB = Path(statecore.__file__).with_suffix(".pyi")
HEADER = (
    '"""The type checkers\' view of statecore/__init__.py, whose names load on first use.\n\n'
    "Generated from its export table by ``python -m tests.public_stub``; do not edit.\n"
    '"""\n'
)


def render() -> str:
    lines = [HEADER]
    by_module = sorted(statecore._EXPORTS.items(), key=lambda item: (item[1], item[0].lower()))
    for module, group in groupby(by_module, key=lambda item: item[1]):
        names = [name for name, _ in group]
        lines.append(f"from {module} import (")
        lines.extend(f"    {name} as {name}," for name in names)
        lines.append(")")
    lines.append("")
    lines.append("__version__: str")
    lines.append("__all__: list[str]")
    return "\n".join(lines) + "\n"


def main() -> int:
    STUB.write_text(render())
    print(f"wrote {STUB}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
