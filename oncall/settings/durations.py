"""Durations in settings: Prometheus-style strings ("5s", "1m30s", "250ms") or plain seconds."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, Field, PlainSerializer

_UNITS = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")


#: Longer than anything oncall waits for; bounds what datetime and format_duration must take.
MAX_SECONDS = 100 * 31536000.0


def _shown(value: object) -> str:
    text = str(value)
    return text if len(text) < 40 else f"{text[:20]}…"


def _finite(number: float, value: object) -> float:
    """number as seconds; an integer too large for a float, inf and nan are errors."""
    try:
        seconds = float(number)
    except OverflowError:
        seconds = float("inf")
    if not (seconds == seconds and abs(seconds) <= MAX_SECONDS):  # noqa: PLR0124 - nan check
        raise ValueError(f"invalid duration {_shown(value)!r}: not a finite number up to 100 years")
    return seconds


def parse_duration(value: object) -> object:
    """Turn "1m30s" / "250ms" / 5 into seconds; leave other types for pydantic to reject."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return _finite(value, value)
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return _finite(float(text), value)
    except (ValueError, OverflowError) as exc:
        if "not a finite" in str(exc):
            raise
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text or total > MAX_SECONDS:
        raise ValueError(
            f"invalid duration {_shown(value)!r}: use e.g. 5s, 1m30s, 250ms or a number of seconds"
        )
    return total


def format_duration(seconds: float) -> str:
    """Seconds as the shortest Prometheus-style string: 90.0 → "1m30s", 0.25 → "250ms"."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    parts = []
    rest = seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if rest >= size:
            count = int(rest // size)
            parts.append(f"{count}{unit}")
            rest -= count * size
    if rest or not parts:
        parts.append(f"{rest:g}s")
    return "".join(parts)


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    Field(gt=0),
    PlainSerializer(format_duration, return_type=str),
]
