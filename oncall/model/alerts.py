"""Alert rules and alert states as plain values (docs/on-call.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from oncall.errors import BackendError

if TYPE_CHECKING:
    from oncall.model.alertmanager import InstanceRouting, RuleRouting

AlertStateName = Literal["inactive", "pending", "firing", "unknown"]
SourceName = Literal["prometheus", "local"]
#: Why a source gave no state, as a value; the error text beside it says more.
FailureReason = Literal[
    "timeout", "refused", "disconnected", "http 5xx", "http 4xx", "auth", "bad payload",
    "query error", "other",
]  # fmt: skip
#: The reasons that mean the backend could not be asked: the answer is incomplete (exit 3).
UNREACHABLE: frozenset[FailureReason] = frozenset(
    {"timeout", "refused", "disconnected", "http 5xx"}
)
#: The reasons after which no state is known, so a script must not read "all well" (exit 3):
#: the unreachable ones, and a backend that answered but not with its API (a 401/403, an SSO
#: proxy's HTML login page, garbage). A query error is the rule's fault, not the backend's.
INCOMPLETE: frozenset[FailureReason] = UNREACHABLE | {"auth", "bad payload", "http 4xx"}
#: BackendError reasons that are a FailureReason as they are.
_NAMED: dict[str, FailureReason] = {
    name: name
    for name in ("timeout", "refused", "disconnected", "auth", "bad payload", "query error")
}


def failure_reason(exc: BackendError) -> FailureReason:
    """The value of a backend's failure: "auth" for 401/403, else its HTTP status class, or
    its named reason."""
    if exc.http_status in (401, 403) or exc.reason == "auth":
        return "auth"
    if exc.http_status is not None:
        return "http 5xx" if exc.http_status >= 500 else "http 4xx"
    return _NAMED.get(exc.reason, "other")


#: The unit an alert's value and threshold are shown in: seconds or a percentage of a ratio.
Unit = Literal["s", "%"]
UNIT_ANNOTATION = "unit"

#: A comparison against a number literal (`> 1.2`, `< bool 0.8`, `>= 1e3`) that ends the
#: expression or a clause of `and`/`or`/`unless`: `x > 2 * y` compares against `2 * y`.
_COMPARISON = re.compile(
    r"(>=|<=|==|!=|>|<)\s*(?:bool\s+)?(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"(?=\s*(?:$|#|(?:and|or|unless)\b))"
)
_OPENING, _CLOSING = "([{", ")]}"


def _code(expr: str, opening: str, closing: str) -> Iterator[tuple[int, str, int]]:
    """Each character of a PromQL expression outside its strings and comments, with its
    index and its bracket depth (counting `opening`/`closing`; the brackets themselves are
    not yielded). Both readers below need the same notion of "outside a string"."""
    depth, quote, index = 0, "", 0
    while index < len(expr):
        char = expr[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'`":
            quote = char
        elif char in opening:
            depth += 1
        elif char in closing:
            depth -= 1
        elif char == "#":  # a comment, to the end of its line
            newline = expr.find("\n", index)
            if newline < 0:
                return
            index = newline
            continue
        else:
            yield index, char, depth
        index += 1


def threshold_of(expr: str) -> tuple[str, float] | None:
    """The first comparison against a number at the top level of a PromQL expression:
    `rate(x[1m]) > 1.2` → ('>', 1.2). None when every comparison is nested in brackets or
    against another expression: the board then shows the value alone."""
    after = 0  # an operator against an expression is two characters: step over both
    for index, char, depth in _code(expr, "([{", ")]}"):
        if depth != 0 or char not in "<>=!" or index < after:
            continue
        found = _COMPARISON.match(expr, index)
        if found:
            return found.group(1), float(found.group(2))
        if expr[index : index + 2] in (">=", "<=", "==", "!="):
            after = index + 2
    return None


_SECONDS = re.compile(r"_seconds_(?:bucket|sum|count)\b|_seconds\b(?!_total)")
_RATIO_NAME = re.compile(r"_(?:perc|ratio)\b")


def unit_of(expr: str, annotations: dict[str, str] | None = None) -> Unit | None:
    """The unit a rule compares in: the `unit` annotation when a pack sets it ("s", "%",
    "none"), else inferred from the expression: a `*_seconds` histogram, sum/count or gauge →
    seconds; a `*_perc` / `*_ratio` metric or a division (`rate(a) / rate(b)`) → a ratio,
    shown as %. None: a count or anything else, shown as the bare number."""
    given = (annotations or {}).get(UNIT_ANNOTATION, "").strip()
    if given in ("s", "%"):
        return "s" if given == "s" else "%"
    if given:
        return None
    outside = _outside_selectors(expr)
    if _SECONDS.search(outside):
        return "s"
    if _RATIO_NAME.search(outside) or "/" in outside:
        return "%"
    return None


def _outside_selectors(expr: str) -> str:
    """The expression without strings, label matchers `{…}`, ranges `[…]` and comments."""
    return "".join(char for _, char, depth in _code(expr, "[{", "]}") if depth == 0)


LivenessState = Literal["live", "silent", "unknown"]


@dataclass(frozen=True)
class Liveness:
    """Whether a rule can fire here (`oncall.alerts.liveness`): `live`, `silent` (it cannot:
    its metric or label values do not exist, or its window is under the scrape interval;
    `reasons` say which) or `unknown` (Prometheus could not be asked: `reasons`)."""

    state: LivenessState
    reasons: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "; ".join(self.reasons)


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule of a Prometheus rule file, located in its file.

    `for_s` and `keep_firing_for_s` are seconds (0 when absent), already multiplied by the
    `alerts.for_scale` setting when a drill scales them.
    """

    name: str
    expr: str
    group: str
    file: str
    line: int
    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    group_interval_s: float | None = None
    #: The column of its `alert:` key (0: not known); not part of its identity.
    col: int = field(default=0, compare=False)

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")

    @cached_property
    def threshold(self) -> tuple[str, float] | None:
        """The operator and number the expression compares against (see `threshold_of`);
        parsed once per rule, not at every repaint of the board."""
        return threshold_of(self.expr)

    @cached_property
    def unit(self) -> Unit | None:
        """The unit of its value and threshold on the board (see `unit_of`)."""
        return unit_of(self.expr, self.annotations)


@dataclass(frozen=True)
class AlertInstance:
    """The state of one alert for one label set, at one evaluation.

    `active_since` is when the expression first returned this label set (pending start);
    `fires_in_s` is the time left until it fires, while pending; `firing_for_s` the time since
    it fired. `stale_since` is set when this state is an old one kept because the source could
    not be asked (then `error` says why).
    """

    rule: str
    state: AlertStateName
    labels: dict[str, str]
    value: float | None
    active_since: float | None
    fires_in_s: float | None
    firing_for_s: float | None
    last_evaluation: float | None
    source: SourceName
    error: str | None = None
    stale_since: float | None = None
    reason: FailureReason | None = None  # set with `error` when the source could not answer
    #: The rule's annotations expanded for this label set and value (by Prometheus, or here).
    annotations: dict[str, str] = field(default_factory=dict)
    #: What Alertmanager does with it (active, silenced, inhibited, unknown); None when no
    #: Alertmanager is configured or the instance does not fire.
    routing: InstanceRouting | None = None


def context_key(context: str, name: str) -> str:
    """An alert's key on a board of several contexts (context names never hold a '/')."""
    return f"{context}/{name}" if context else name


def split_key(key: str) -> tuple[str, str]:
    """(context, alert name) of a key made by `context_key`; ("", key) without a context."""
    context, sep, name = key.partition("/")
    return (context, name) if sep else ("", key)


@dataclass(frozen=True)
class RuleStatus:
    """One rule's state after a refresh, with the instances behind it.

    `error` is the text a screen shows; `reason` is the value behind it when the source could
    not be asked (None when it answered, even with a rule error such as a bad expression).
    """

    rule: AlertRule
    source: SourceName
    state: AlertStateName
    instances: tuple[AlertInstance, ...]
    error: str | None = None
    stale_since: float | None = None
    last_evaluation: float | None = None
    reason: FailureReason | None = None
    #: Its firing instances as Alertmanager handles them, and its acknowledgement (`ack`);
    #: None when no Alertmanager is configured or nothing fires.
    routing: RuleRouting | None = None
    #: The context (`contexts:`) whose Prometheus said so; "" with one context only.
    context: str = ""
    #: The rule's health as Prometheus reports it ("ok", "err", "unknown": not evaluated yet)
    #: and, when "err", its `lastError`: the evaluation failed (`error` says so too) though
    #: the state is still Prometheus' own. None for a rule evaluated here.
    health: str | None = None
    last_error: str | None = None
    #: Whether the rule can fire here (None: not checked); see `oncall.alerts.liveness`.
    liveness: Liveness | None = None

    @property
    def silent(self) -> bool:
        """Inactive because it cannot fire here (its metric is missing…): not a healthy
        "inactive". A rule that fires or is pending is never silent."""
        return (
            self.state == "inactive"
            and self.liveness is not None
            and (self.liveness.state == "silent")
        )

    @property
    def key(self) -> str:
        """What the app knows the alert by: `eu/LLMHighP99Latency`, or the name alone."""
        return context_key(self.context, self.rule.name)

    @property
    def unreachable(self) -> bool:
        """The source could not be asked (refused, timed out, a 5xx): the state is not known."""
        return self.reason in UNREACHABLE

    @property
    def incomplete(self) -> bool:
        """No state is known because of the backend (see INCOMPLETE): exit 3, not 0."""
        return self.reason in INCOMPLETE

    @property
    def value(self) -> float | None:
        """The most severe instance's value (firing before pending), if any."""
        for wanted in ("firing", "pending"):
            for instance in self.instances:
                if instance.state == wanted and instance.value is not None:
                    return instance.value
        return None

    @property
    def fires_in_s(self) -> float | None:
        waits = [i.fires_in_s for i in self.instances if i.fires_in_s is not None]
        return min(waits) if waits and self.state == "pending" else None

    @property
    def firing_for_s(self) -> float | None:
        times = [i.firing_for_s for i in self.instances if i.firing_for_s is not None]
        return max(times) if times and self.state == "firing" else None
