"""Percentiles. Three definitions are in use; each script keeps the one it always printed,
so its figures stay comparable with the ones in docs/bench-notes/."""

from __future__ import annotations

import math
from collections.abc import Sequence


def pct(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): the smallest sample with at least q % at or
    below it."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]


def pct_or_nan(xs: Sequence[float], q: float) -> float:
    """``pct``, or NaN when there is no sample."""
    return pct(xs, q) if xs else float("nan")


def pct_rounded(xs: Sequence[float], q: float) -> float:
    """The sample at the rounded index q/100 * (n - 1) (q in 0..100): the definition of
    bench/start_latency.py's table and of docs/benchmarks.md's later sections."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]
