"""Intervals over benchmark rounds: a mean with its 95% interval, and a ratio's geometric mean
with its 95% interval.

Each round gives one value per scenario (its mean latency, its CPU per turn), and rounds are
short and interleaved, so a change in the machine's load lands on every scenario of a round
alike. The rounds' values are treated as independent samples: the interval is Student's t over
them (for ratios, over their logarithms, which makes a ratio and its inverse symmetric and
keeps the interval positive). No scipy here: the t quantile is found by integrating the t
density and bisecting.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from functools import cache

_STEPS = 2000  # Simpson intervals over [0, t]: far below the table's four decimals


def _t_density(x: float, df: int) -> float:
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(x * x / df))


def _t_cdf_above_half(x: float, df: int) -> float:
    """P(T <= x) - 1/2 for x >= 0, by Simpson's rule."""
    h = x / _STEPS
    total = _t_density(0.0, df) + _t_density(x, df)
    for i in range(1, _STEPS):
        total += (4 if i % 2 else 2) * _t_density(i * h, df)
    return total * h / 3


@cache
def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom
    (``t_quantile(10) == 2.2281...``)."""
    if df < 1:
        raise ValueError("a t interval needs at least two values")
    target = level / 2
    low, high = 0.0, 1.0
    while _t_cdf_above_half(high, df) < target:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        if _t_cdf_above_half(mid, df) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` and its 95% Student's t interval."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = t_quantile(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def ratio_interval(ratios: Sequence[float]) -> tuple[float, float, float]:
    """(geometric mean, low, high) of per-round ratios, the interval taken on their logs."""
    mean, low, high = mean_interval([math.log(r) for r in ratios])
    return math.exp(mean), math.exp(low), math.exp(high)
