"""Request-rate curves of the load generator and the arrival times they give.

* `constant`: the base rate throughout;
* `ramp`: linear from 10% to 100% of the base rate over the run;
* `spike`: the base rate, and 5× the base rate during the middle fifth of the run.

Arrivals are evenly spaced at the current rate (deterministic, so tests can count them).
"""

from __future__ import annotations

from collections.abc import Iterator

CURVES = ("constant", "ramp", "spike")
RAMP_START = 0.1
SPIKE_FACTOR = 5.0
SPIKE_WINDOW = (0.4, 0.6)


def rate_at(curve: str, base_rate: float, t: float, duration: float) -> float:
    """Requests per second at t seconds into a run of duration seconds."""
    if base_rate <= 0 or duration <= 0:
        raise ValueError("base_rate and duration must be > 0")
    frac = min(max(t / duration, 0.0), 1.0)
    if curve == "constant":
        return base_rate
    if curve == "ramp":
        return base_rate * (RAMP_START + (1.0 - RAMP_START) * frac)
    if curve == "spike":
        start, end = SPIKE_WINDOW
        return base_rate * (SPIKE_FACTOR if start <= frac < end else 1.0)
    raise ValueError(f"unknown curve {curve!r}; one of {', '.join(CURVES)}")


def arrival_times(curve: str, base_rate: float, duration: float) -> Iterator[float]:
    """Offsets in seconds of each arrival, all within [0, duration)."""
    t = 0.0
    while t < duration:
        yield t
        t += 1.0 / rate_at(curve, base_rate, t, duration)
