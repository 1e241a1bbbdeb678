"""ADK's session-service contract (``contract_cases``) run against ADK's own services and
``StatecoreSessionService`` on every backend.

Each service's failures must be exactly the ones listed here with their reason, so a case ADK
passes and statecore does not (or the reverse, unlisted) fails the suite; the counts are
asserted. Where ADK's own services fail a case, the reason is ADK's (documented in
docs/google_adk.md, "Where statecore differs from ADK's services").
"""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from tests.integrations.google_adk.contract_cases import CASES
from tests.integrations.google_adk.services import ADK_KINDS, KIND_PARAMS, open_services

pytestmark = pytest.mark.timeout(300)

#: Cases a service fails, and why. Everything else must pass.
EXPECTED_FAILURES: dict[str, dict[str, str]] = {
    "adk-memory": {
        # One process, no revision check: the in-memory service appends what it is given.
        "a_stale_session_object_is_refused": "no stale check in memory",
        "a_stale_writer_on_another_instance_is_refused": "no stale check in memory",
        "racing_writers_of_one_revision_store_exactly_one_event": "no stale check in memory",
    },
    "adk-database": {
        # On SQLite the revision check is not atomic with the write (no row lock), so two
        # instances holding one revision both store their event: the history forks.
        "racing_writers_of_one_revision_store_exactly_one_event": "SQLite forks the history",
    },
}

#: How many cases each service passes (asserted, so a case dropped or added is noticed).
EXPECTED_PASSES = {
    kind: len(CASES) - len(EXPECTED_FAILURES.get(kind, {}))
    for kind in [
        *ADK_KINDS,
        "statecore-memory",
        "statecore-sqlite",
        "statecore-postgres",
        "statecore-mariadb",
    ]
}


def test_case_count() -> None:
    # The figures the docs quote.
    assert len(CASES) == 26
    assert EXPECTED_PASSES["adk-memory"] == 23
    assert EXPECTED_PASSES["adk-database"] == 25
    assert EXPECTED_PASSES["statecore-sqlite"] == 26


def test_statecore_passes_every_case_adk_passes() -> None:
    adk_passes = {
        name for kind in ADK_KINDS for name in CASES if name not in EXPECTED_FAILURES[kind]
    }
    for kind, failures in EXPECTED_FAILURES.items():
        if kind.startswith("statecore"):
            assert not set(failures) & adk_passes, kind


@pytest.mark.parametrize("kind", KIND_PARAMS)
async def test_contract(kind: str, tmp_path: Path) -> None:
    failed: dict[str, str] = {}
    async with open_services(kind, tmp_path) as services:
        for n, (name, run) in enumerate(CASES.items()):
            services.app = f"app_{n}"
            try:
                await run(services)
            except Exception as exc:  # a failing case is recorded, not raised
                failed[name] = "".join(traceback.format_exception_only(exc)).strip()
    expected = EXPECTED_FAILURES.get(kind, {})
    unexpected = {k: v for k, v in failed.items() if k not in expected}
    assert not unexpected, f"{kind} fails cases it must pass: {unexpected}"
    assert set(failed) == set(expected), f"{kind} now passes {set(expected) - set(failed)}"
    assert len(CASES) - len(failed) == EXPECTED_PASSES[kind]
