"""Prometheus durations exactly as rule files accept them ("1m30s", "250ms", "0").

`oncall.settings.durations.parse_duration` is deliberately looser (plain numbers, decimals,
spaces) for our own settings; a rule file must also load in Prometheus, so here we follow
prometheus/common `model.ParseDuration`: integer amounts, units y w d h m s ms, each at most once
and from largest to smallest, or the bare string "0".
"""

from __future__ import annotations

import re

_UNIT_S = {"y": 31536000, "w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
# [0-9], not \d: Python's \d also matches non-ASCII digits, which Go's regexp does not.
_DURATION = re.compile(
    r"(?:(?P<y>[0-9]+)y)?(?:(?P<w>[0-9]+)w)?(?:(?P<d>[0-9]+)d)?(?:(?P<h>[0-9]+)h)?"
    r"(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?(?:(?P<ms>[0-9]+)ms)?"
)
# Go's time.Duration is an int64 of nanoseconds.
_MAX_S = (2**63 - 1) / 1e9

HINT = "use whole numbers with units y, w, d, h, m, s, ms from largest to smallest, e.g. 1m30s"


def parse_prom_duration(text: str) -> float:
    """Seconds in a Prometheus duration; ValueError, with a hint, where Prometheus refuses it."""
    if text == "0":
        return 0.0
    if text == "":
        raise ValueError("empty duration")
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f'invalid duration "{text}": {HINT}')
    total = sum(int(amount) * _UNIT_S[unit] for unit, amount in match.groupdict().items() if amount)
    if total > _MAX_S:
        raise ValueError(f'duration "{text}" is out of range')
    return float(total)
