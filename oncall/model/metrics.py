"""Samples and series as the Prometheus query API returns them, with numbers already parsed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One value of an instant query: labels, evaluation timestamp (unix seconds), value."""

    labels: dict[str, str]
    timestamp: float
    value: float


@dataclass(frozen=True)
class Series:
    """One series of a range query: labels and (timestamp, value) points in time order."""

    labels: dict[str, str]
    points: list[tuple[float, float]]
