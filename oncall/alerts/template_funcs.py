"""The functions of annotation templates, as Prometheus' template/template.go defines them.

`humanize*` give Prometheus' texts (4 significant digits, SI or binary prefixes, durations as
`1d 2h 3m 4s`); Go's builtins (or, and, not, eq, …) follow text/template's truth rules (the
empty string, 0, false, nil and empty maps are false). Used by `oncall.alerts.templates`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from typing import Any

from oncall.model.linear_regex import compile_linear


def _float(value: object) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    try:
        return float(str(value))
    except ValueError:
        return math.nan


def g4(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.4g}"


def humanize(raw: object) -> str:
    v = _float(raw)
    if v == 0 or math.isnan(v) or math.isinf(v):
        return g4(v)
    prefix = ""
    if abs(v) >= 1:
        for p in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(v) < 1000:
                break
            prefix, v = p, v / 1000
        return g4(v) + prefix
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return g4(v) + prefix


def humanize1024(raw: object) -> str:
    v = _float(raw)
    if abs(v) <= 1 or math.isnan(v) or math.isinf(v):
        return g4(v)
    prefix = ""
    for p in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(v) < 1024:
            break
        prefix, v = p, v / 1024
    return g4(v) + prefix


def humanize_duration(raw: object) -> str:
    v = _float(raw)
    if math.isnan(v) or math.isinf(v):
        return g4(v)
    if v == 0:
        return g4(v) + "s"
    if abs(v) >= 1:
        sign = "-" if v < 0 else ""
        v = abs(v)
        whole = int(v)
        seconds, minutes = whole % 60, (whole // 60) % 60
        hours, days = (whole // 3600) % 24, whole // 86400
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {seconds}s"
        if minutes:
            return f"{sign}{minutes}m {seconds}s"
        return f"{sign}{g4(v)}s"
    prefix = ""
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return f"{g4(v)}{prefix}s"


def humanize_percentage(raw: object) -> str:
    return g4(_float(raw) * 100) + "%"


def humanize_timestamp(raw: object) -> str:
    v = _float(raw)
    if math.isnan(v) or math.isinf(v):
        return g4(v)
    return str(dt.datetime.fromtimestamp(v, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f %z UTC"))


def printf(fmt: object, *args: object) -> str:
    """Go's fmt.Sprintf for the verbs annotations use (%s %v %d %f %g %e %q %x %%)."""
    text = str(fmt).replace("%v", "%s")
    converted = []
    for arg in args:
        converted.append(_float(arg) if isinstance(arg, str) and _NUMERIC.fullmatch(arg) else arg)
    try:
        return text % tuple(converted)
    except (TypeError, ValueError):
        return f"%!(BADFORMAT {fmt!s})"


_NUMERIC = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def truth(value: object) -> bool:
    return value not in (None, "", 0, 0.0, False, {}, [])


def _or(*args: object) -> object:
    return next((a for a in args if truth(a)), args[-1] if args else "")


def _and(*args: object) -> object:
    return next((a for a in args if not truth(a)), args[-1] if args else "")


def _cmp(op: Callable[[Any, Any], bool]) -> Callable[[object, object], bool]:
    def compare(a: object, b: object) -> bool:
        if isinstance(a, str) and isinstance(b, str):
            return op(a, b)
        return op(_float(a), _float(b))

    return compare


FUNCTIONS: dict[str, Callable[..., object]] = {
    "humanize": humanize,
    "humanize1024": humanize1024,
    "humanizeDuration": humanize_duration,
    "humanizePercentage": humanize_percentage,
    "humanizeTimestamp": humanize_timestamp,
    "printf": printf,
    "toUpper": lambda s: str(s).upper(),
    "toLower": lambda s: str(s).lower(),
    "title": lambda s: str(s).title(),
    "stripPort": lambda s: re.sub(r":\d+$", "", str(s)),
    "stripDomain": lambda s: str(s).split(".", 1)[0],
    # A rule's pattern (a cluster's PrometheusRule is anyone's text) over label values a
    # backend sent: RE2 as Go's regexp in Prometheus, linear in the text (docs/audit.md).
    "match": lambda pattern, s: compile_linear(str(pattern)).search(str(s)) is not None,
    "reReplaceAll": lambda pattern, repl, s: compile_linear(str(pattern)).sub(
        re.sub(r"\$(\d+)", r"\\\1", str(repl)), str(s)
    ),
    # `query` needs Prometheus: rules that use it are expanded by Prometheus when it evaluates
    # them; in local evaluation the query is not run and expands to nothing.
    "query": lambda _q: [],
    "first": lambda items: items[0] if isinstance(items, list) and items else None,
    "value": lambda sample: sample.get("Value", "") if isinstance(sample, dict) else "",
    "label": lambda name, sample: (
        sample.get("Labels", {}).get(str(name), "") if isinstance(sample, dict) else ""
    ),
    "or": _or,
    "and": _and,
    "not": lambda a: not truth(a),
    "len": lambda a: len(a) if isinstance(a, str | dict | list) else 0,
    "eq": _cmp(lambda a, b: a == b),
    "ne": _cmp(lambda a, b: a != b),
    "lt": _cmp(lambda a, b: a < b),
    "le": _cmp(lambda a, b: a <= b),
    "gt": _cmp(lambda a, b: a > b),
    "ge": _cmp(lambda a, b: a >= b),
}
