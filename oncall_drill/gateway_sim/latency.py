"""Simulated vector-search latency: a distribution given by its median and 99.9th percentile.

A lognormal with median m has quantile q at m·exp(σ·z_q); from p50 and p99.9 we get
σ = ln(p99.9 / p50) / z_0.999. Scenarios move these two numbers to breach or clear the
"vector search P99.9 > 200 ms" alert; "constant" pins every draw at the median.
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist

#: z-score of the 99.9th percentile of the standard normal distribution (≈ 3.090).
Z_999 = NormalDist().inv_cdf(0.999)
#: No draw takes longer than this, whatever the configuration (bounded sleeps).
MAX_DRAW_SECONDS = 60.0


def lognormal_sigma(p50: float, p999: float) -> float:
    """σ of the lognormal whose median is p50 and whose 99.9th percentile is p999."""
    if p50 <= 0 or p999 < p50:
        raise ValueError("need 0 < p50 <= p999")
    return math.log(p999 / p50) / Z_999


def draw_seconds(rng: random.Random, distribution: str, p50: float, p999: float) -> float:
    """One simulated latency in seconds."""
    if distribution == "constant":
        value = p50
    else:
        value = rng.lognormvariate(math.log(p50), lognormal_sigma(p50, p999))
    return min(value, MAX_DRAW_SECONDS)
