"""The turn benchmark's intervals (bench/round_stats.py) and its run comparison
(bench/compare_runs.py) compute what they say."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.compare_runs import compare
from bench.compare_runs import main as compare_main
from bench.round_stats import mean_interval, ratio_interval, t_quantile


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.7062), (2, 4.3027), (5, 2.5706), (10, 2.2281), (19, 2.0930), (31, 2.0395)],
)
def test_t_quantile_matches_the_published_table(df: int, expected: float) -> None:
    assert t_quantile(df) == pytest.approx(expected, abs=5e-4)


def test_mean_interval_is_students_t_over_the_values() -> None:
    mean, low, high = mean_interval([10.0, 12.0, 14.0, 16.0])
    half = 3.1824 * math.sqrt(20 / 3) / 2  # t(3) * sample sd / sqrt(n)
    assert mean == 13.0
    assert (low, high) == pytest.approx((13.0 - half, 13.0 + half), abs=1e-3)
    assert mean_interval([5.0]) == (5.0, 5.0, 5.0)
    with pytest.raises(ValueError):
        t_quantile(0)


def test_ratio_interval_is_symmetric_in_logs() -> None:
    geo, low, high = ratio_interval([1.0, 1.21])
    assert geo == pytest.approx(1.1)
    assert low * high == pytest.approx(geo * geo)
    inverse = ratio_interval([1.0, 1 / 1.21])
    assert inverse[0] == pytest.approx(1 / geo)
    assert inverse[1] == pytest.approx(1 / high) and inverse[2] == pytest.approx(1 / low)


def _run(latency: float, cpu: float, smoke: bool = False) -> dict:
    ratio = {
        "latency_mean": {"value": latency, "ci95": [latency - 0.1, latency + 0.1]},
        "cpu_per_turn": {"value": cpu, "ci95": [cpu - 0.1, cpu + 0.1]},
    }
    phase = {"ratios": {"agent_sqlite/floor_activity": ratio}}
    return {"smoke": smoke, "single_session": phase, "concurrent": phase}


def test_compare_flags_a_ratio_more_than_the_tolerance_apart(tmp_path: Path) -> None:
    rows = compare(_run(1.00, 2.00), _run(1.04, 2.12), 0.05)
    assert [(r["phase"], r["measure"], r["within_tolerance"]) for r in rows] == [
        ("single_session", "latency_mean", True),
        ("single_session", "cpu_per_turn", False),
        ("concurrent", "latency_mean", True),
        ("concurrent", "cpu_per_turn", False),
    ]
    assert rows[1]["difference_pct"] == 6.0

    paths = []
    for name, run in (("a", _run(1.0, 2.0)), ("b", _run(1.01, 1.98)), ("c", _run(1.0, 2.0, True))):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(run))
    out = tmp_path / "compare.json"
    assert compare_main([str(paths[0]), str(paths[1]), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["within_tolerance"] == 4
    assert compare_main([str(paths[0]), str(paths[1]), "--tolerance", "0.005"]) == 1
    # A smoke test's numbers never pass as a result, however close.
    assert compare_main([str(paths[0]), str(paths[2])]) == 1


def test_a_smoke_run_cannot_take_a_result_name() -> None:
    from bench.turns import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--quick", "--out", "bench/results/turns_run1.json"])
    settings = parse_args(["--quick"])
    assert settings.smoke and settings.out.name == "turns-quick.json"
    assert not parse_args([]).smoke and parse_args(["--long"]).long_turns == 10_000
    assert parse_args([]).long_turns == 0  # the full run leaves the long session out


def test_server_config_values_are_parsed_and_a_malformed_one_is_refused() -> None:
    from bench.turns import parse_args

    assert parse_args([]).server_config == {}
    settings = parse_args(
        ["--server-config", "history.transferProcessorMaxPollRPS=1000", "--server-config", "a.b= 2"]
    )
    assert settings.server_config == {"history.transferProcessorMaxPollRPS": "1000", "a.b": "2"}
    for bad in ("no-equals-sign", "=1000", "key="):
        with pytest.raises(SystemExit):
            parse_args(["--server-config", bad])


def test_pauses_before_turns_stay_out_of_latency_and_wall_time() -> None:
    import asyncio

    from bench.measure import Samples, Scenario, sequential
    from bench.turns import parse_args

    async def send(session_id: str, n: int, turn_id: str) -> None:
        await asyncio.sleep(0.01)

    scenario = Scenario("s", "a 10 ms turn", send, lambda s: s, "tq")
    into = Samples()
    asyncio.run(sequential(scenario, "x", 0, 5, into, pause=lambda: 0.05))
    assert len(into.latencies) == 5
    assert all(0.01 <= x < 0.05 for x in into.latencies)
    assert 0.25 <= into.paused_seconds < 1.0
    # The block's wall time is the turns' own: five 10 ms turns, not the 250 ms of pauses.
    assert sum(into.latencies) <= into.wall_seconds < sum(into.latencies) + 0.05

    assert parse_args([]).pause_ms == 50 and parse_args(["--pause-ms", "0"]).pause_ms == 0
    for bad in ("-1", "10001"):
        with pytest.raises(SystemExit):
            parse_args(["--pause-ms", bad])
