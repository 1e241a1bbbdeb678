"""The storage benchmark runs end to end in quick mode and writes a result that makes sense.

No timing thresholds: speed targets live in the benchmark's report (bench/README.md). What is
asserted here holds on any machine: the seeded sessions are consistent, every operation runs
the same statements at both sizes, context assembly tokenises no history, and no statement
reads the whole message table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.quick_bench import run_quick_bench

pytestmark = [pytest.mark.slow]


def _latency_ok(stats: dict, ops: int) -> None:
    assert stats["ops"] == ops
    assert 0 < stats["min_ms"] <= stats["p50_ms"] <= stats["p99_ms"] <= stats["max_ms"]
    assert stats["process_cpu_ms_per_op"] > 0


def _phase_ok(block: dict, ops: int, target: float) -> None:
    for size in ("small", "large"):
        _latency_ok(block[size], ops)
    assert block["p50_ratio"] == pytest.approx(
        block["large"]["p50_ms"] / block["small"]["p50_ms"], rel=0.01
    )
    assert block["target_p50_ratio"] == target
    assert block["met"] == (block["p50_ratio"] <= target)
    # The same statements at 100 and at 10,000 messages: nothing grows with the log.
    assert block["small"]["statements_per_op"] == block["large"]["statements_per_op"]
    assert len(block["large"]["statements_per_op"]) == 1


def test_store_bench_quick(tmp_path: Path) -> None:
    result, _ = run_quick_bench("store", tmp_path)

    assert result["benchmark"] == "store" and result["mode"] == "quick"
    assert result["machine"]["cpu_count"] >= 1 and result["machine"]["date"].startswith("20")
    settings = result["settings"]
    assert settings["large_messages"] == 10_000 and settings["small_messages"] == 100
    assert set(result["dialects"]) == {"sqlite", "postgresql"}
    assert "skipped" not in result["dialects"]["sqlite"]

    for dialect, block in result["dialects"].items():
        if "skipped" in block:  # only PostgreSQL may be missing, and it says why
            assert dialect == "postgresql" and "unreachable" in block["skipped"]
            continue
        for size, messages in (("small", 100), ("large", 10_000)):
            seeded = block["sessions"][size]
            assert seeded["messages"] == seeded["rows"] == messages
            assert seeded["running_total_mismatches"] == 0
            assert len(seeded["api_checks"]) == 7
            grown = messages + settings["warmup"] + settings["appends"]
            assert block["after"][size] == {"last_seq": grown, "message_count": grown}

        _phase_ok(block["append"], settings["appends"], result["targets"]["append_p50_ratio"])
        # append: the session lookup, the turn's existing indexes, the INSERT, the counters
        # (on PostgreSQL the INSERT rides in the counters' UPDATE), and the change feed's
        # event, which the store writes in the same transaction whatever door the append
        # came through: one statement on PostgreSQL, the numbering and the insert on SQLite.
        appends = [4] if dialect == "postgresql" else [6]
        assert block["append"]["large"]["statements_per_op"] == appends

        context = block["context"]
        _phase_ok(context, settings["contexts"], result["targets"]["context_p50_ratio"])
        # Tokenised text is the head and the new message, never the stored window.
        assert (
            context["small"]["tokenized_chars_per_op"] == context["large"]["tokenized_chars_per_op"]
        )
        assert max(context["large"]["tokenized_chars_per_op"]) < 5_000
        for size in ("small", "large"):
            assert min(context[size]["window_messages"]) > 20
            assert context[size]["context_tokens_max"] <= settings["context_budget_tokens"]

        plans = block["plans"]["large"]
        # The plans read are those of the append's own statements, not the feed's.
        assert len(plans["append"]) == appends[0] - (1 if dialect == "postgresql" else 2)
        assert len(plans["context"]) == context["large"]["statements_per_op"][0]
        assert block["no_full_scan_of_messages"] is True
        assert not any(p["full_scan_of_messages"] for kind in plans.values() for p in kind)
        growth = block["work_growth_large_to_small"]
        if dialect == "sqlite":
            # Instructions per statement, 100x the log: a walk over it would grow ~100x.
            assert all(g is not None and g < 3 for kind in growth.values() for g in kind)
        else:
            for kind in plans.values():
                for p in kind:
                    # The planner sees the real range: no guess of a third of the table.
                    assert (
                        p["estimated_rows_from_messages"] <= 10 * p["rows_read_from_messages"] + 200
                    )
                    assert p["jit_ms"] == 0

        kv = block["kv"]
        for name in ("api_put", "raw_put", "api_get", "raw_get"):
            _latency_ok(kv[name], settings["kv_iterations"])
        for op in ("put", "get"):
            expected = kv[f"api_{op}"]["p50_ms"] / kv[f"raw_{op}"]["p50_ms"]
            assert kv[f"{op}_p50_ratio_api_to_raw"] == pytest.approx(expected, rel=0.01)
