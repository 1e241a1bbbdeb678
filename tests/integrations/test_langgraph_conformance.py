"""LangGraph's own conformance suite (``langgraph-checkpoint-conformance``) against
StatecoreSaver on SQLite, PostgreSQL and MariaDB: every capability, none skipped."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from statecore.integrations.langgraph import StatecoreSaver
from statecore.store.sql._engine import create_store_engine
from tests.integrations.langgraph_dbs import DIALECTS, migrated_database


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_statecore_saver_passes_langgraph_conformance(dialect: str) -> None:
    async with migrated_database(dialect, "lgconf") as url:

        @checkpointer_test(name=f"StatecoreSaver[{dialect}]")
        async def saver() -> AsyncGenerator[StatecoreSaver, None]:
            engine = create_store_engine(url)
            try:
                yield StatecoreSaver(engine)
            finally:
                await engine.dispose()

        report = await validate(saver)

    results = report.results
    # Every capability LangGraph defines was detected and run, none skipped.
    assert set(results) == {c.value for c in ALL_CAPABILITIES}
    failures = {name: r.failures for name, r in results.items() if not r.passed}
    assert failures == {}
    assert all(r.detected and r.tests_skipped == 0 for r in results.values())
    passed = sum(r.tests_passed for r in results.values())
    print(
        f"\nconformance {dialect}: {passed} passed, per capability "
        + ", ".join(f"{n}={r.tests_passed}" for n, r in sorted(results.items()))
    )
    assert passed > 0
