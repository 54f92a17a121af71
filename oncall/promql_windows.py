"""Scale the time windows of a PromQL expression, for drills that run time faster.

A rule pack is written for production: `rate(x[5m])` holds four or more samples at
Prometheus' default one-minute scrape interval. A drill scrapes every second and scales the
rules' `for` by `--for-scale` (0.05: 2m → 6s); with the windows left at 5 minutes, a fault
would take minutes to move a rate. `scale_windows` multiplies every range (`[5m]`), subquery
range and step (`[1h:1m]`) and `offset` of an expression by the same scale, so the drill keeps
short windows, while never shrinking a range below `MIN_RANGE_S`: a minute, 60 samples at the
drill's 1-second scrape, so that ratios and quantiles of its light load stay as steady as the
[1m] windows drills used before (20 s made a hit ratio hover around its threshold). Used by
the drill's deployed copies of the rule files (`oncall_drill.rules`) and by the app's own
evaluation of them (`alerts.for_scale`), so both evaluate the same expression.

Only durations are rewritten: the text is cut into string literals and comments (kept as
they are) and code, in which a duration follows `[`, `:` inside brackets, or `offset`.
"""

from __future__ import annotations

import re

#: A scaled range never goes below this (unless the written range already was shorter).
MIN_RANGE_S = 60.0

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = r"(?:\d+(?:ms|s|m|h|d|w|y))+"
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
#: String literals ("…", '…', `…`) and comments: copied unchanged.
_OPAQUE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`|#[^\n]*')
_RANGE = re.compile(r"\[\s*(" + _DURATION + r")\s*(?::\s*(" + _DURATION + r")?\s*)?\]")
_OFFSET = re.compile(r"\boffset(\s+-?)(" + _DURATION + r")\b")


def duration_seconds(text: str) -> float:
    """Seconds of a PromQL duration ("1m30s", "250ms"); ValueError when it is not one."""
    if not re.fullmatch(_DURATION, text):
        raise ValueError(f"not a PromQL duration: {text!r}")
    return sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(text))


def format_duration(seconds: float) -> str:
    """A PromQL duration for seconds, to the millisecond ("6s", "1500ms")."""
    millis = max(1, round(seconds * 1000))
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def scaled_range(text: str, scale: float) -> str:
    """A range scaled, but not below MIN_RANGE_S (nor above what it was when it shrinks)."""
    seconds = duration_seconds(text)
    scaled = seconds * scale
    if scale < 1:
        scaled = min(seconds, max(scaled, MIN_RANGE_S))
    return text if scaled == seconds else format_duration(scaled)


def _scale_code(code: str, scale: float) -> str:
    def bracket(match: re.Match[str]) -> str:
        rng, step = match.group(1), match.group(2)
        text = scaled_range(rng, scale)
        if ":" not in match.group(0):
            return f"[{text}]"
        step_text = format_duration(duration_seconds(step) * scale) if step else ""
        return f"[{text}:{step_text}]"

    def offset(match: re.Match[str]) -> str:
        return f"offset{match.group(1)}{scaled_range(match.group(2), scale)}"

    return _OFFSET.sub(offset, _RANGE.sub(bracket, code))


def scale_windows(expr: str, scale: float) -> str:
    """`expr` with every range, subquery and offset duration multiplied by `scale`."""
    if scale == 1:
        return expr
    out, pos = [], 0
    for match in _OPAQUE.finditer(expr):
        out.append(_scale_code(expr[pos : match.start()], scale))
        out.append(match.group(0))
        pos = match.end()
    out.append(_scale_code(expr[pos:], scale))
    return "".join(out)
