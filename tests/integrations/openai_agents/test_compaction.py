"""The SDK's ``OpenAIResponsesCompactionSession`` over StatecoreSession: the same items and
the same model requests as over the SDK's ``SQLiteSession``, each compaction one statecore
transaction that retracts the replaced items (the log keeps them) instead of clear + add."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    OpenAIResponsesCompactionSession,
    OpenAIResponsesModel,
    Runner,
    SQLiteSession,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from statecore.integrations.openai_agents import StatecoreSession
from tests.dbs import fresh_database
from tests.integrations.openai_agents.responses_api import ResponsesAPI

set_tracing_disabled(True)

PROMPTS = [
    "What is the tallest mountain in the world?",
    "How tall is it in feet?",
    "When was it first climbed?",
    "Who was on that expedition?",
    "What country is the mountain in?",
]

DIALECTS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mariadb", marks=pytest.mark.mariadb),
]


@pytest.fixture(params=DIALECTS)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "oaicompact") as url:
        yield url


class CountingSession(StatecoreSession):
    """Counts whole-history replacements: the automatic compactions must not need one."""

    whole_replacements = 0

    async def _atomic_replace_items(self, items: list[Any]) -> bool:
        self.whole_replacements += 1
        return await super()._atomic_replace_items(items)


async def converse(api: ResponsesAPI, underlying: Any) -> list[list[Any]]:
    """The compaction example's conversation; the items stored after each run."""
    client = AsyncOpenAI(base_url=api.base_url, api_key="offline", max_retries=0)
    session = OpenAIResponsesCompactionSession(
        session_id="demo-session",
        underlying_session=underlying,
        client=client,
        model="gpt-4.1",
        should_trigger_compaction=lambda ctx: len(ctx["compaction_candidate_items"]) >= 4,
    )
    agent = Agent(
        name="Assistant",
        instructions="Reply concisely.",
        model=OpenAIResponsesModel(model="gpt-4.1", openai_client=client),
    )
    after: list[list[Any]] = []
    for prompt in PROMPTS:
        await Runner.run(agent, prompt, session=session)
        after.append(await session.get_items())
    await session.run_compaction({"force": True})
    after.append(await session.get_items())
    return after


async def test_compaction_matches_the_sdk_session_and_keeps_the_log(
    url: str, tmp_path: Path
) -> None:
    reference_api = ResponsesAPI().start()
    try:
        reference = SQLiteSession("demo", db_path=tmp_path / "sdk.db")
        expected = await converse(reference_api, reference)
        reference.close()
    finally:
        reference_api.stop()
    api = ResponsesAPI().start()
    session = CountingSession(f"demo-{uuid.uuid4().hex[:8]}", database_url=url)
    try:
        got = await converse(api, session)
        assert got == expected
        assert api.requests == reference_api.requests
        # Automatic compaction happened (a compact request, compaction items in the log).
        compacts = [path for path, _ in api.requests if path.endswith("/responses/compact")]
        assert len(compacts) >= 2
        # Only the manual run_compaction replaced the whole history; the automatic ones
        # replaced a suffix of the snapshot each read.
        assert session.whole_replacements == 1
        assert [item.get("type") for item in got[3]] == ["compaction"]
        # Nothing was deleted: every item ever added is still in the log, retracted.
        store = await session._store()
        async with store.transaction() as tx:
            every = await tx.conversation.messages(session.ref, include_retracted=True)
            retracted = await tx.conversation.retracted(session.ref)
        visible = len(got[-1])
        assert len(every) == visible + len(retracted)
        assert len(retracted) > len(PROMPTS)
    finally:
        api.stop()
        await session.close()


async def test_a_suffix_that_changed_after_the_snapshot_is_not_replaced(url: str) -> None:
    session = StatecoreSession(f"race-{uuid.uuid4().hex[:8]}", database_url=url)
    try:
        first = [{"role": "user", "content": f"m{n}"} for n in range(3)]
        await session.add_items(first)
        snapshot = await session._get_compaction_snapshot(2)
        assert snapshot is not None and not snapshot.complete
        assert snapshot.items == first[1:]
        # Another writer adds an item: the snapshot's suffix is no longer the newest.
        await StatecoreSession(session.session_id, database_url=url).add_items(
            [{"role": "user", "content": "late"}]
        )
        summary = [{"type": "compaction", "id": "c1", "encrypted_content": "x"}]
        assert await snapshot.replace_suffix(0, summary) is False
        assert [i["content"] for i in await session.get_items()] == ["m0", "m1", "m2", "late"]
        # A fresh snapshot replaces its suffix in one go, the older items kept.
        snapshot = await session._get_compaction_snapshot(3)
        assert snapshot is not None
        assert await snapshot.replace_suffix(1, summary) is True
        assert await session.get_items() == [first[0], first[1], *summary]
        assert await snapshot.replace_suffix(1, summary) is False  # already replaced
    finally:
        await session.close()


async def test_a_session_with_a_profile_or_inside_a_turn_offers_no_snapshot() -> None:
    from statecore.core._profile import SessionProfile

    session = StatecoreSession(
        f"p-{uuid.uuid4().hex[:8]}", database_url="memory://", profile=SessionProfile()
    )
    await session.add_items([{"role": "user", "content": "hi"}])
    assert await session._get_compaction_snapshot(5) is None
    assert await session._atomic_replace_items([]) is False
    plain = StatecoreSession(f"q-{uuid.uuid4().hex[:8]}", database_url="memory://")
    assert await plain._get_compaction_snapshot(0) is None
    empty = await plain._get_compaction_snapshot(3)
    assert empty is not None and empty.items == [] and empty.complete
    assert await empty.replace_suffix(0, []) is False
