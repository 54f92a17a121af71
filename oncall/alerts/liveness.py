"""Rule liveness: whether an alerting rule can fire here, as a pure function over fetched facts.

A rule whose metric does not exist at this exporter's version, whose label matcher matches
nothing, or whose `rate(x[1m])` window holds fewer than two samples at the scrape interval is
inactive forever: an "inactive" that is not a sign of health. This module reads a rule's
expression with `promql-parser` (Prometheus' parser ported to Rust; never a hand-written
grammar) into its selectors (`selectors_of`), and judges it (`judge`) from `Facts` that
`oncall.alerts.liveness_fetch` asks Prometheus for: which selectors match series now (and the
jobs behind them), which metric names exist, the values a matched label does have, and the
scrape interval of each job.

The verdict follows the expression's structure, not each selector alone: `a or b` is silent
only when both sides are; `a and b`, `a unless b` (its left side), an arithmetic or comparison
of two vectors, a function or an aggregation are silent when a vector they read is. What reads
absence on purpose (`absent(x)`, `absent_over_time(x[5m])`) is never silent for it; number
literals, `vector(1)` and `time()` always have a value.

Windows: the functions that need two samples (`rate`, `increase`, `irate`, `delta`, `deriv`,
…) are silent with a window under two scrape intervals; `*_over_time` need one sample, so
under one interval (Prometheus 3's windows are left-open: one interval can hold one sample).
A selector whose jobs have no known target (a recording rule's output) is not window-checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import promql_parser as pp
import re2

from oncall.model.alerts import Liveness
from oncall.probes.absence import alternates

#: Functions whose range needs two samples to give a value.
TWO_SAMPLES = frozenset({
    "rate", "increase", "irate", "delta", "idelta", "deriv", "changes", "resets",
    "predict_linear", "holt_winters", "double_exponential_smoothing",
})  # fmt: skip
#: Functions that read absence on purpose: their argument being empty is their use.
ABSENCE = frozenset({"absent", "absent_over_time"})
#: Functions whose value does not depend on any series.
CONSTANT = frozenset({"vector", "time", "pi", "scalar"})
_RE2_QUIET = re2.Options()
_RE2_QUIET.log_errors = False  # the error is reported as a problem, not logged to stderr
#: At most this many label values are named in a reason.
SHOWN_VALUES = 8


@dataclass(frozen=True)
class Selector:
    """One vector selector of an expression: its metric name ("" when it has none), its
    matchers as (label, op, value) with op one of = != =~ !~, and `text`, the selector as a
    PromQL query of its own (without offset or @). `window_s` and `function`: the range and
    the function reading it, when it is the range of such a function."""

    name: str
    matchers: tuple[tuple[str, str, str], ...]
    text: str
    window_s: float | None = None
    function: str = ""


@dataclass(frozen=True)
class Facts:
    """What Prometheus said, for `judge`. A selector missing from `matched` was not asked
    (unknown); an empty set: it matches no series."""

    #: selector text → the `job` values of the series it matches now ("" for no job label)
    matched: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: the metric names asked about (a missing selector's name and its alternatives) that exist
    names: frozenset[str] = frozenset()
    #: (metric name, label) → the values that label has on that metric
    label_values: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    #: job → scrape interval in seconds (the largest of its targets)
    intervals: Mapping[str, float] = field(default_factory=dict)
    #: why the facts are incomplete (Prometheus could not be asked), None when they are not
    error: str | None = None
    #: selectors Prometheus refused to count (a syntax its version does not read)
    refused: frozenset[str] = frozenset()


# MatchOp values are not hashable: keyed by their names.
_OPS = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}


def _selector(node: pp.VectorSelector, window_s: float | None, function: str) -> Selector:
    groups = node.matchers.or_matchers or [node.matchers.matchers]
    matchers = tuple((m.name, _OPS[str(m.op)], m.value) for group in groups for m in group)
    name = node.name or next((v for n, op, v in matchers if n == "__name__" and op == "="), "")
    # json.dumps quotes as PromQL reads double-quoted strings (Go's escapes, \uXXXX included).
    texts = [",".join(f"{m.name}{_OPS[str(m.op)]}{json.dumps(m.value)}" for m in group)
             for group in groups]  # fmt: skip
    inner = " or ".join(texts)
    return Selector(name, matchers, f"{node.name or ''}{{{inner}}}", window_s, function)


@lru_cache(maxsize=8192)
def parsed(expr: str) -> pp.Expr | None:
    """The expression's syntax tree (None: the parser refuses it), cached by its text."""
    try:
        return pp.parse(expr)
    except ValueError:
        return None


def selectors_of(expr: str) -> list[Selector]:
    """Every vector selector of an expression, in reading order ([] when it does not parse)."""
    tree = parsed(expr)
    found: list[Selector] = []
    if tree is not None:
        _silent(tree, Facts(), found, collect=True)
    return found


def regex_error(expr: str) -> str | None:
    """Why a regex matcher of the expression is one Prometheus refuses, or None.

    promql-parser checks regexes with Rust's `regex`, which reads some that Go's regexp
    refuses (`x++`, `a{1001}`); RE2, whose syntax Go's follows, is asked again. Anchored as
    Prometheus anchors them."""
    for selector in selectors_of(expr):
        for label, op, value in selector.matchers:
            if op in ("=~", "!~"):
                try:
                    re2.compile(f"^(?:{value})$", _RE2_QUIET)
                except re2.error as exc:
                    raw = exc.args[0] if exc.args else ""
                    why = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
                    return f"error parsing regexp in {label}{op}{json.dumps(value)}: {why}"
    return None


def judge(expr: str, facts: Facts) -> Liveness:
    """Whether an expression can have a value here, given `facts` (see the module)."""
    tree = parsed(expr)
    if tree is None:
        return Liveness("unknown", ("the expression does not parse",))
    if facts.error is not None:
        return Liveness("unknown", (facts.error,))
    emptied: list[Selector] = []
    verdict = _silent(tree, facts, emptied, collect=False)
    if verdict is None:
        refused = [s.text for s in selectors_of(expr) if s.text in facts.refused]
        if refused:
            return Liveness("unknown", tuple(f"Prometheus refused {text}" for text in refused))
        return Liveness("unknown", ("not asked yet",))
    if not verdict:
        return Liveness("live")
    reasons: list[str] = []
    for selector in emptied:
        reason = _why(selector, facts)
        if reason and reason not in reasons:
            reasons.append(reason)
    return Liveness("silent", tuple(reasons))


def _silent(node: pp.Expr, facts: Facts, out: list[Selector], *, collect: bool) -> bool | None:
    """Whether `node` is empty for certain (True), can have a value (False) or is not known
    (None); the selectors that make it empty are appended to `out` (every selector when
    `collect`: then the verdict is meaningless)."""
    if isinstance(node, pp.MatrixSelector):
        return _leaf(_selector(node.vector_selector, node.range.total_seconds(), ""), facts,
                     out, collect=collect)  # fmt: skip
    if isinstance(node, pp.VectorSelector):
        return _leaf(_selector(node, None, ""), facts, out, collect=collect)
    if isinstance(node, pp.Call):
        name = node.func.name
        if name in CONSTANT and not node.args:
            return False
        # What an absence function reads is not a reason for silence (but is a selector).
        arg_out = [] if name in ABSENCE and not collect else out
        results = []
        for arg in node.args:
            if isinstance(arg, pp.MatrixSelector):
                window = arg.range.total_seconds()
                leaf = _selector(arg.vector_selector, window, name)
                results.append(_leaf(leaf, facts, arg_out, collect=collect))
            else:
                results.append(_silent(arg, facts, arg_out, collect=collect))
        if name in ABSENCE or name in CONSTANT:
            return False
        return _any(results)
    if isinstance(node, pp.BinaryExpr):
        op = str(node.op)
        left_out: list[Selector] = []
        right_out: list[Selector] = []
        left = _silent(node.lhs, facts, left_out, collect=collect)
        right = _silent(node.rhs, facts, right_out, collect=collect)
        if op == "or":
            verdict = True if left and right else (None if None in (left, right) else False)
            out.extend(left_out + right_out if verdict or collect else [])
            return verdict
        if op == "unless":
            out.extend(left_out + (right_out if collect else []))
            return left
        out.extend(left_out + right_out)
        return _any([left, right])
    if isinstance(node, pp.AggregateExpr):
        results = [_silent(node.expr, facts, out, collect=collect)]
        if node.param is not None:
            _silent(node.param, facts, out if collect else [], collect=collect)
        return _any(results)
    if isinstance(node, pp.ParenExpr | pp.UnaryExpr | pp.SubqueryExpr):
        return _silent(node.expr, facts, out, collect=collect)
    return False  # number and string literals


def _any(results: Iterable[bool | None]) -> bool | None:
    results = list(results)
    if True in results:
        return True
    return None if None in results else False


def _leaf(selector: Selector, facts: Facts, out: list[Selector], *, collect: bool) -> bool | None:
    if collect:
        out.append(selector)
        return False
    jobs = facts.matched.get(selector.text)
    if jobs is None:
        return None
    if not jobs or _short_window(selector, jobs, facts) is not None:
        out.append(selector)
        return True
    return False


def _short_window(selector: Selector, jobs: frozenset[str], facts: Facts) -> float | None:
    """The scrape interval a window is too short for, or None."""
    if selector.window_s is None or not selector.function:
        return None
    known = [facts.intervals[job] for job in jobs if job in facts.intervals]
    if not known:
        return None
    interval = max(known)
    needed = 2 if selector.function in TWO_SAMPLES else 1
    if selector.function not in TWO_SAMPLES and not selector.function.endswith("_over_time"):
        return None
    return interval if selector.window_s < needed * interval else None


def _duration(seconds: float) -> str:
    whole = int(seconds)
    if whole == seconds and whole % 60 == 0:
        return f"{whole // 60}m"
    return f"{seconds:g}s"


def alternatives(name: str) -> list[str]:
    """Names the same metric has under another exporter version or deployment: the known
    renames of `oncall.probes.absence` (`_total`, Ray Serve's `ray_vllm:`), which the
    checklist's missing-data reasons name too."""
    return [other for other, _ in alternates(name)]


def _why(selector: Selector, facts: Facts) -> str:
    jobs = facts.matched.get(selector.text)
    if jobs:
        interval = _short_window(selector, jobs, facts)
        if interval is not None:
            samples = "two samples" if selector.function in TWO_SAMPLES else "a sample"
            return (f"{selector.function}(…[{_duration(selector.window_s or 0)}]) needs {samples};"
                    f" the scrape interval of {', '.join(sorted(jobs))} is "
                    f"{_duration(interval)}")  # fmt: skip
        return ""
    name = selector.name
    if name and name not in facts.names:
        found = [f"{other} — {why}" for other, why in alternates(name) if other in facts.names]
        hint = f"; found {found[0]}" if found else ""
        return f"no series named {name}{hint}"
    emptied = []
    for label, op, value in selector.matchers:
        if label == "__name__" or op not in ("=", "=~"):
            continue
        values = facts.label_values.get((name, label))
        if values is None or (op == "=" and value in values):
            continue
        shown = ", ".join(values[:SHOWN_VALUES]) + (", …" if len(values) > SHOWN_VALUES else "")
        here = f"values here are {{{shown}}}" if values else f"{name} has no {label} label"
        emptied.append(f"{label}{op}{json.dumps(value)}: {here}")
    if emptied:
        return f"{selector.text} matches nothing: " + "; ".join(emptied)
    return f"{selector.text} matches no series"
