"""Every entry of the bad-input catalog, applied to a live session of its own.

For each entry: (1) the caller gets the documented statecore error code (for signals, the
rejection recorded in the describe report); (2) the session still commits a turn afterwards;
(3) every stored row (messages, hints, KV, scoped state, flow, orchestration, sessions) is
exactly what it was before, read with plain SQL.
"""

from __future__ import annotations

import asyncio

import pytest

from statecore.core._errors import ERRORS_BY_CODE
from tests.catalog.appliers import act, prepare
from tests.catalog.bad_inputs import ENTRIES, Entry
from tests.catalog.conftest import CatalogEnv
from tests.catalog.subjects import follow_up, open_subject
from tests.sql_rows import all_rows

pytestmark = pytest.mark.temporal

FOLLOW_UP_SECONDS = 8


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.id)
async def test_bad_input_is_typed_harmless_and_changes_nothing(
    catalog_env: CatalogEnv, entry: Entry
) -> None:
    assert entry.code in ERRORS_BY_CODE, f"{entry.code} is not a statecore error code"
    subject = await open_subject(catalog_env, entry)
    await prepare(subject, entry)
    before = await all_rows(catalog_env.database_url)
    assert before["messages"] and before["kv_entries"] and before["flow_checkpoints"]
    assert before["scoped_states"] and before["orchestration_states"] and before["hints"]

    # A wedged workflow shows up as a timeout here, not as a hung test run.
    async with asyncio.timeout(90):
        code = await act(catalog_env, subject, entry)

    assert code == entry.code
    assert await all_rows(catalog_env.database_url) == before
    # "At once": an input that left a workflow task failing would hold the next turn for a
    # retry (about 10 s) or forever.
    async with asyncio.timeout(FOLLOW_UP_SECONDS):
        await follow_up(catalog_env, subject)
