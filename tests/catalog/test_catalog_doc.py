"""docs/bad-input.md is the catalog, rendered; the catalog itself is well-formed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from statecore.core._errors import ERRORS_BY_CODE
from tests.catalog.bad_inputs import ENTRIES, REFERENCES
from tests.catalog.render import DOC, render

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_page_matches_the_catalog() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/bad-input.md is out of date: run python -m tests.catalog.render"
    )


def test_entries_have_unique_ids_and_documented_codes() -> None:
    duplicates = [id for id, n in Counter(e.id for e in ENTRIES).items() if n > 1]
    assert not duplicates
    assert {e.code for e in ENTRIES} <= set(ERRORS_BY_CODE)
    assert all(e.input and e.what_to_do for e in ENTRIES)
    assert len(ENTRIES) >= 30


def test_every_reference_names_existing_tests() -> None:
    for reference in REFERENCES:
        for path in reference.covered_by.split(", "):
            assert (ROOT / path).exists(), path
