"""Write docs/bad-input.md from the catalog: ``python -m tests.catalog.render``.

``--check`` writes nothing and exits 1 when the committed page differs from the catalog.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.catalog.bad_inputs import ENTRIES, REFERENCES

DOC = Path(__file__).resolve().parents[2] / "docs" / "bad-input.md"

INTRO = """\
# Bad input: what each entry point refuses

Generated from `tests/catalog/bad_inputs.py` by `python -m tests.catalog.render`; edit the
catalog, not this page. `tests/catalog/test_bad_input_catalog.py` applies every row to a live
session and checks that the caller gets the error code shown, that the session commits its
next turn, and that no stored row changed.

Where the code appears:

- updates (`send_message`, `reset_state`, `compact_state`, `describe_state`) and turns of
  the turn API fail with a Temporal `ApplicationError` whose `type` is the code;
  `AgentSessionClient` raises the matching statecore error class (exported from
  `statecore`);
- signals cannot answer: the rejection (operation, code, message) is recorded in the
  `rejections` list of the `describe` report and logged;
- a failed `describe` query carries only a message, which starts with the code;
- library calls (`AgentSessionClient`, bundle import) raise the statecore error class
  (exported from `statecore`), whose `code` attribute is the code.

None of these requests is retryable as it is: change it as the last column says.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    lines = [
        INTRO,
        f"## The catalog ({len(ENTRIES)} entries)",
        "",
        "| Entry point | Input | Error code | What the caller should do |",
        "|---|---|---|---|",
    ]
    for entry in ENTRIES:
        cells = (entry.entry_point, entry.input, f"`{entry.code}`", entry.what_to_do)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += [
        "",
        "## Covered by other suites",
        "",
        "| Entry point | Bad input | Tests |",
        "|---|---|---|",
    ]
    for ref in REFERENCES:
        cells = (ref.entry_point, ref.what, ref.covered_by)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    page = render()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != page:
            print(f"{DOC} is out of date: run python -m tests.catalog.render", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(page, encoding="utf-8")
    print(f"wrote {DOC} ({len(ENTRIES)} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
