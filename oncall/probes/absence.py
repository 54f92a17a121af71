"""Say when a metric has no series, and under which other name it may be exported.

A query over a metric nobody exports answers like a healthy one: an empty vector, a null.
The probes that read Prometheus ask, in the same request or one more, which of the metric
names they read have series now, and turn a missing one into a reason for the fact it feeds
(`facts.absent`, read by `oncall.checklist.absence`):

    no vllm:kv_cache_usage_perc series; found ray_vllm:kv_cache_usage_perc — a Ray Serve
    deployment?

Known other names: Ray Serve exports vLLM's metrics with the prefix `ray_vllm:` (the Ray
Serve LLM dashboard, `python/ray/dashboard/modules/metrics/dashboards/
serve_llm_dashboard_panels.py`); a counter exposed without or with its `_total` suffix
(`vllm:num_preemptions` vs `vllm:num_preemptions_total`).

`selectors_of` parses a PromQL query with `promql-parser` (Rust core, the maintained parser;
never a hand-written grammar) for the `prometheus.query` probe, whose query is the runbook's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: prefix → other prefixes the same metric is exported under, and why.
PREFIXES: dict[str, tuple[tuple[str, str], ...]] = {
    "vllm:": (("ray_vllm:", "a Ray Serve deployment?"),),
    "ray_vllm:": (("vllm:", "vLLM served directly, not through Ray Serve?"),),
}
#: Label that tags the presence rows of a batched query with the metric's name.
METRIC_LABEL = "oncall_metric"


def alternates(name: str) -> list[tuple[str, str]]:
    """(other name, what it suggests) for a metric name."""
    out: list[tuple[str, str]] = []
    for prefix, others in PREFIXES.items():
        if name.startswith(prefix):
            rest = name.removeprefix(prefix)
            out.extend((other + rest, why) for other, why in others)
    if name.endswith("_total"):
        out.append((name.removesuffix("_total"), "a counter exposed without _total?"))
    elif not name.endswith(("_bucket", "_sum", "_count")):
        out.append((name + "_total", "the counter is named with _total"))
    return out


def with_alternates(names: Iterable[str]) -> list[str]:
    """The names and their known other names, each once, in order."""
    out = list(names)
    out.extend(other for name in list(out) for other, _ in alternates(name))
    return list(dict.fromkeys(out))


def presence_query(names: Sequence[str], selector: str = "") -> str:
    """PromQL answering which of `names` have series now (matching `selector`): one row per
    present name, its name also in `oncall_metric` (so the rows stay apart when joined with
    `or` to other tagged results)."""
    pattern = "|".join(names)  # metric names hold [a-zA-Z0-9_:] only: nothing to escape
    extra = f", {selector}" if selector else ""
    inner = f'group by (__name__) ({{__name__=~"{pattern}"{extra}}})'
    return f'label_replace({inner}, "{METRIC_LABEL}", "$1", "__name__", "(.+)")'


def missing_reason(wanted: Sequence[str], present: set[str], selector: str = "") -> str | None:
    """None when any of `wanted` has series; else why not, naming another name that has."""
    if any(name in present for name in wanted):
        return None
    where = f" matching {{{selector}}}" if selector else ""
    names = " or ".join(wanted)
    for name in wanted:
        for other, why in alternates(name):
            if other in present:
                return f"no {names} series{where}; found {other} — {why}"
    return f"no {names} series{where}"


@dataclass(frozen=True)
class Selector:
    """One vector selector of a query, as PromQL text without offset or @."""

    name: str | None
    text: str


def selectors_of(query: str) -> list[Selector]:
    """The vector selectors of `query` (each once); [] when it does not parse (Prometheus
    answers that with its own error)."""
    import promql_parser  # loaded by the probes that parse queries only

    try:
        expr = promql_parser.parse(query)
    except ValueError:
        return []
    found: list[Selector] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            matchers = [
                f"{m.name}{_OPS[str(m.op)]}{json.dumps(m.value)}" for m in node.matchers.matchers
            ]
            name = node.name or ""
            text = f"{name}{{{','.join(matchers)}}}" if matchers or not name else name
            found.append(Selector(node.name, text))

    promql_parser.walk(expr, visit)
    return list({s.text: s for s in found}.values())


_OPS = {
    "MatchOp.Equal": "=",
    "MatchOp.NotEqual": "!=",
    "MatchOp.Re": "=~",
    "MatchOp.NotRe": "!~",
}

#: Label tagging the rows of `selectors_query` with the selector's position.
SELECTOR_LABEL = "oncall_selector"


def selectors_query(selectors: Sequence[Selector]) -> str:
    """One PromQL query answering which selectors match series now (a row tagged with each
    matching one's index) and which known other names of their metrics have series."""
    parts = [
        f'label_replace(group({s.text}), "{SELECTOR_LABEL}", "{i}", "", "")'
        for i, s in enumerate(selectors)
    ]
    others = [other for s in selectors if s.name for other, _ in alternates(s.name)]
    if others:
        parts.append(presence_query(list(dict.fromkeys(others))))
    return " or ".join(parts)


def selectors_reason(
    selectors: Sequence[Selector], matched: set[int], present: set[str]
) -> str | None:
    """Why the query found nothing: the selectors that match no series (with another name
    that has series, when one does); None when every selector matches."""
    reasons: list[str] = []
    for i, selector in enumerate(selectors):
        if i in matched:
            continue
        reason = f"no series match {selector.text}"
        for other, why in alternates(selector.name or ""):
            if other in present:
                reason += f"; found {other} — {why}"
                break
        reasons.append(reason)
    return "; ".join(reasons) or None


def present_names(rows: Iterable[Mapping[str, str]]) -> set[str]:
    """The metric names of presence rows (their labels)."""
    return {labels[METRIC_LABEL] for labels in rows if METRIC_LABEL in labels}
