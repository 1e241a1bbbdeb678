"""Bad input to StatecoreSaver: a typed error, nothing half-written, and the saver and the
thread still work afterwards."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select, update

from statecore.core._errors import (
    CheckpointTooLargeError,
    CorruptCheckpointError,
    InvalidInputError,
)
from statecore.integrations.langgraph import StatecoreSaver
from statecore.store.sql._schema import graph_blobs, graph_checkpoints, graph_writes
from tests.integrations.langgraph_chat import build_chat, user_message
from tests.integrations.langgraph_dbs import DIALECTS, open_saver

LIMIT = 4096


async def _row_counts(saver: StatecoreSaver) -> tuple[int, int, int]:
    async with saver.engine.connect() as conn:
        return tuple(  # type: ignore[return-value]
            [
                int(await conn.scalar(select(func.count()).select_from(t)))
                for t in (graph_checkpoints, graph_blobs, graph_writes)
            ]
        )


def _checkpoint(number: int, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "v": 1,
        "id": f"1ef00000-0000-6000-8000-{number:012d}",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": dict.fromkeys(values, 1),
        "versions_seen": {},
        "updated_channels": None,
    }


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_value_over_the_limit_is_refused_whole(dialect: str) -> None:
    async with open_saver(dialect, max_value_bytes=LIMIT) as saver:
        config = {"configurable": {"thread_id": "big", "checkpoint_ns": ""}}
        graph = build_chat("delta", saver)
        await graph.ainvoke(user_message(1), config)
        before = await _row_counts(saver)
        latest = await saver.aget_tuple(config)
        assert latest is not None

        # One small channel and one too large: neither is stored, nor the checkpoint.
        oversized = _checkpoint(9, {"small": "ok", "huge": "x" * (LIMIT + 1)})
        with pytest.raises(CheckpointTooLargeError) as caught:
            await saver.aput(latest.config, oversized, {"step": 9}, {"small": 1, "huge": 1})
        assert caught.value.code == "CheckpointTooLarge"
        assert caught.value.details["limit"] == LIMIT
        with pytest.raises(CheckpointTooLargeError):
            await saver.aput_writes(
                latest.config, [("small", 1), ("huge", "y" * (LIMIT + 1))], task_id="task"
            )
        assert await _row_counts(saver) == before

        # A graph turn whose message is too large fails with the typed error...
        with pytest.raises(CheckpointTooLargeError):
            await graph.ainvoke(
                {"messages": [{"role": "user", "content": "z" * LIMIT, "id": "big"}]}, config
            )
        # ... and the thread goes on from its last good checkpoint.
        result = await graph.ainvoke(user_message(2), config)
        assert [m.id for m in result["messages"]][-2:] == ["user-2", "ai-2"]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_corrupt_stored_blob_is_reported_and_the_thread_can_be_replaced(
    dialect: str,
) -> None:
    async with open_saver(dialect) as saver:
        graph = build_chat("default", saver)
        damaged = {"configurable": {"thread_id": "damaged"}}
        healthy = {"configurable": {"thread_id": "healthy"}}
        for config in (damaged, healthy):
            await graph.ainvoke(user_message(1), config)
        async with saver.engine.begin() as conn:
            await conn.execute(
                update(graph_blobs)
                .where(graph_blobs.c.value_type != "empty")
                .where(
                    graph_blobs.c.thread_key
                    == select(graph_checkpoints.c.thread_key)
                    .where(graph_checkpoints.c.thread_id == b"damaged")
                    .limit(1)
                    .scalar_subquery()
                )
                .values(value=b"\xc1\xff not msgpack")
            )
        with pytest.raises(CorruptCheckpointError) as caught:
            await saver.aget_tuple(damaged)
        assert caught.value.code == "CorruptCheckpoint"
        with pytest.raises(CorruptCheckpointError):
            await graph.ainvoke(user_message(2), damaged)
        # Other threads are unaffected; the damaged one can be deleted and started again.
        assert len((await graph.ainvoke(user_message(2), healthy))["messages"]) == 4
        await saver.adelete_thread("damaged")
        assert len((await graph.ainvoke(user_message(1), damaged))["messages"]) == 2


async def test_malformed_arguments_are_typed_errors_and_change_nothing() -> None:
    async with open_saver("sqlite") as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        await saver.aput(config, _checkpoint(1, {"a": 1}), {}, {"a": 1})
        await saver.acopy_thread("t", "copy")
        before = await _row_counts(saver)
        bad_id = _checkpoint(2, {"a": 2})
        bad_id["id"] = "not ascii é"
        with pytest.raises(InvalidInputError, match="checkpoint id"):
            await saver.aput(config, bad_id, {}, {"a": 2})
        with pytest.raises(InvalidInputError, match="prune strategy"):
            await saver.aprune(["t"], strategy="keep_some")
        with pytest.raises(InvalidInputError, match="not one string"):
            await saver.aprune("t")
        with pytest.raises(InvalidInputError, match="not one string"):
            await saver.adelete_for_runs("run")
        with pytest.raises(InvalidInputError, match="already has checkpoints"):
            await saver.acopy_thread("t", "copy")
        with pytest.raises(InvalidInputError, match="no thread"):
            await saver.aget_tuple({"configurable": {}})
        with pytest.raises(InvalidInputError, match="max_value_bytes"):
            StatecoreSaver(saver.engine, max_value_bytes=0)
        assert await _row_counts(saver) == before
        assert await saver.aget_tuple(config) is not None
