"""How the screens write states, durations, ages and numbers: plain text, no colours.

Every state carries a symbol as well as a colour, so the screens read the same with NO_COLOR
and on a monochrome terminal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oncall.model.alerts import RuleStatus

#: Alert states: the symbol says it without colour. `silent`: inactive because it cannot fire
#: here (`RuleStatus.silent`), never shown as a healthy inactive.
STATE_SYMBOL = {"firing": "●", "pending": "◐", "inactive": "○", "unknown": "?", "silent": "◌"}
#: Theme variable of each alert state's colour.
STATE_COLOUR = {
    "firing": "error",
    "pending": "warning",
    "inactive": "success",
    "unknown": "primary",
    "silent": "warning",
}


def shown_state(status: RuleStatus) -> str:
    """The state a screen shows: `silent` for an inactive rule that cannot fire here."""
    return "silent" if status.silent else status.state


#: Step states: the checklist's statuses, plus `queued` (planned, not begun) and `running`.
STEP_SYMBOL = {
    "ok": "✓",
    "warn": "!",
    "fail": "✗",
    "error": "E",
    "unknown": "?",
    "skipped": "-",
    "running": "◌",
    "queued": "·",
}
STEP_COLOUR = {
    "ok": "success",
    "warn": "warning",
    "fail": "error",
    "error": "error",
    "unknown": "primary",
    "skipped": "foreground-muted",
    "running": "primary",
    "queued": "foreground-muted",
}


def duration(seconds: float | None) -> str:
    """'42s', '1m12s', '2h05m'; empty when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return ""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def short_age(seconds: float | None) -> str:
    """The coarse age of staleness: '40s', '2m', '3h'."""
    if seconds is None or not math.isfinite(seconds):
        return ""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    return f"{whole // 3600}h"


def number(value: object) -> str:
    """An alert or evidence value: 4 significant digits, thousands separated; 'n/a' if none."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def alert_value(
    value: float | None, threshold: tuple[str, float] | None = None, unit: str | None = None
) -> str:
    """'1.84 > 1.2' (the value against the threshold its rule compares with), '> 1.2' while
    there is no value, '1.84' when the rule has no plain threshold. With the rule's unit
    (`AlertRule.unit`): '9.9 s > 1.2 s' for seconds, '30% > 1%' for a ratio."""
    limit = f"{threshold[0]} {with_unit(threshold[1], unit)}" if threshold else ""
    if value is None:
        return limit
    shown = with_unit(value, unit)
    return f"{shown} {limit}" if limit else shown


def with_unit(value: float, unit: str | None) -> str:
    """A number in its unit: seconds as '9.9 s', a ratio as a percentage '30%'."""
    if unit == "%" and math.isfinite(value):
        return f"{number(value * 100)}%"
    if unit == "s":
        return f"{number(value)} s"
    return number(value)


def params_text(params: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


#: Sparkline levels, lowest first; a slot with no sample is a space.
SPARK_LEVELS = "▁▂▃▄▅▆▇█"


def sparkline(points: Sequence[tuple[float, float]], start: float, end: float, width: int) -> str:
    """An alert's recent values as `width` characters, oldest on the left.

    Each character is a slot of (end - start) / width seconds holding the highest finite
    value in it; heights are scaled between the lowest and highest value shown, so a flat
    series is a flat line. Slots without samples are spaces: a gap stays a gap.
    """
    if width <= 0 or end <= start:
        return ""
    slots: list[float | None] = [None] * width
    span = (end - start) / width
    for ts, value in points:
        if not (start <= ts <= end) or not math.isfinite(value):
            continue
        index = min(width - 1, int((ts - start) / span))
        current = slots[index]
        slots[index] = value if current is None else max(current, value)
    shown = [v for v in slots if v is not None]
    if not shown:
        return ""
    low, high = min(shown), max(shown)
    top = len(SPARK_LEVELS) - 1
    chars = []
    for slot in slots:
        if slot is None:
            chars.append(" ")
        elif high == low:
            chars.append(SPARK_LEVELS[0])
        else:
            chars.append(SPARK_LEVELS[round((slot - low) / (high - low) * top)])
    return "".join(chars)


def when(status: RuleStatus, now: float) -> str:
    """'fires in 1m12s' while pending, 'firing for 3m02s' while firing, 'stale 2m' if old."""
    if status.stale_since is not None:
        return f"stale {short_age(now - status.stale_since)}"
    if status.state == "pending" and status.fires_in_s is not None:
        return f"fires in {duration(status.fires_in_s)}"
    if status.state == "firing" and status.firing_for_s is not None:
        return f"firing for {duration(status.firing_for_s)}"
    if status.silent:  # in sight at 80 columns; the note (and the incident) say why
        return "cannot fire here"
    return ""
