"""The alert state machine of Prometheus, run by oncall itself for rules Prometheus lacks.

Equivalent of `curl -s 'http://PROM/api/v1/query?query=EXPR&time=NOW'` once per rule and
evaluation, plus what Prometheus' `rules/alerting.go` (`AlertingRule.Eval`) does with the
result:

* Every sample of the result is one alert instance, identified by its labels minus
  `__name__`, with the rule's static labels set over them (a rule label wins over a result
  label of the same name). `alertname` is not added: the instance carries it as `rule`.
* A new label set is pending, active since the evaluation time. It fires at the first
  evaluation with `now - active_since >= for` (so with `for: 0` at the first evaluation).
* A label set the expression no longer returns: a pending instance is dropped at once; a
  firing one resolves (is dropped) unless the rule has `keep_firing_for`, in which case it
  keeps firing, with its last value, while `now - keep_firing_since < keep_firing_for`.
  `keep_firing_since` is the first evaluation that did not return it (as Prometheus' field of
  that name; the countdown starts there, not at the last evaluation that did return it). A
  kept instance that the expression returns again simply continues firing.
* A resolved label set that comes back starts over as pending.
* A result with two samples of the same label set (after the above) is an error, as in
  Prometheus: the evaluation fails and the previous state is kept.

Times are compared in whole milliseconds, as Prometheus does, so that float sums such as
`1000.1 + 3` still reach `for: 3s` exactly.

Deliberate differences from Prometheus:

* Label and annotation templates (`{{ $labels.x }}`, `{{ $value }}`) are not expanded: rule
  labels are used verbatim. Rules whose labels use `$value` therefore get one instance where
  Prometheus would make a new one per value (an anti-pattern anyway).
* Resolved instances are not kept for 15 minutes (that is for Alertmanager); only pending and
  firing instances are returned, and a rule with none is inactive: an empty list.
* A failed evaluation does not count as an evaluation: the last known instances are returned
  unchanged but marked stale (`stale_since` = first failure of the run, `error` = why). Their
  `state` is the last known one; the caller shows the rule as unknown/stale, not as that state.
  With no last known instance (never evaluated, or inactive when it last worked) one instance
  with state "unknown", no labels and the error is returned instead.
* The query time is oncall's clock, so the countdown starts at oncall's first evaluation and
  may lag Prometheus' by up to one of Prometheus' evaluation intervals.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

from oncall.backends.prometheus import PrometheusClient
from oncall.errors import BackendError
from oncall.model.alerts import (
    AlertInstance,
    AlertRule,
    AlertStateName,
    FailureReason,
    failure_reason,
)
from oncall.model.metrics import Sample

LabelKey = tuple[tuple[str, str], ...]


def _ms(seconds: float) -> int:
    """Whole milliseconds, the resolution of Prometheus' timestamps and durations."""
    return round(seconds * 1000)


def _key(labels: dict[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


@dataclass
class _Active:
    """One pending or firing label set (Prometheus' `Alert`)."""

    labels: dict[str, str]
    value: float
    active_at: float
    state: AlertStateName = "pending"
    fired_at: float | None = None
    keep_firing_since: float | None = None


def overall_state(instances: list[AlertInstance]) -> AlertStateName:
    """A rule's state from its instances: firing > pending > inactive."""
    states = {instance.state for instance in instances}
    if "firing" in states:
        return "firing"
    if "pending" in states:
        return "pending"
    return "inactive"


class LocalRuleState:
    """The instances of one alerting rule across evaluations; pure, no I/O."""

    def __init__(self, rule: AlertRule) -> None:
        self.rule = rule
        self._active: dict[LabelKey, _Active] = {}
        self._last: list[AlertInstance] = []
        self.last_evaluation: float | None = None
        """Time of the last successful evaluation; None until one succeeds."""
        self.error: str | None = None
        """Why the latest evaluation failed; None after a successful one."""
        self.stale_since: float | None = None
        """First failed evaluation of the current run of failures."""

    @property
    def state(self) -> AlertStateName:
        """Firing if any instance fires, else pending if any is, else inactive.

        "unknown" while no evaluation has succeeded yet or the latest one failed.
        """
        if self.last_evaluation is None or self.error is not None:
            return "unknown"
        return overall_state(self._last)

    def evaluate(self, samples: list[Sample], now: float) -> list[AlertInstance]:
        """Advance the state machine with the expression's result at time `now`."""
        found: dict[LabelKey, tuple[dict[str, str], float]] = {}
        for sample in samples:
            labels = {k: v for k, v in sample.labels.items() if k != "__name__"}
            labels.update(self.rule.labels)
            key = _key(labels)
            if key in found:
                return self.fail(
                    f"vector contains metrics with the same labelset after applying alert "
                    f"labels: {labels}",
                    now,
                )
            found[key] = (labels, sample.value)

        for key, (labels, value) in found.items():
            known = self._active.get(key)
            if known is None:
                self._active[key] = _Active(labels=labels, value=value, active_at=now)
            else:
                known.value = value
                known.keep_firing_since = None

        hold_ms = _ms(self.rule.for_s)
        keep_ms = _ms(self.rule.keep_firing_for_s)
        for key, alert in list(self._active.items()):
            if key not in found:
                if alert.state == "firing" and keep_ms > 0:
                    if alert.keep_firing_since is None:
                        alert.keep_firing_since = now
                    if _ms(now - alert.keep_firing_since) < keep_ms:
                        continue  # keeps firing
                del self._active[key]  # pending: gone; firing: resolved
                continue
            if alert.state == "pending" and _ms(now - alert.active_at) >= hold_ms:
                alert.state = "firing"
                alert.fired_at = now

        self.last_evaluation = now
        self.error = None
        self.stale_since = None
        self._last = sorted(
            (self._instance(alert, now) for alert in self._active.values()),
            key=lambda instance: _key(instance.labels),
        )
        return list(self._last)

    def fail(
        self, error: str, now: float, reason: FailureReason | None = None
    ) -> list[AlertInstance]:
        """The evaluation at `now` failed: the last known instances, marked stale.

        Their state, value and countdown are those of the last successful evaluation (the
        caller shows them as unknown/stale); the state machine does not advance.
        """
        if self.stale_since is None:
            self.stale_since = now
        self.error = error
        if not self._last:
            return [
                AlertInstance(
                    rule=self.rule.name,
                    state="unknown",
                    labels={},
                    value=None,
                    active_since=None,
                    fires_in_s=None,
                    firing_for_s=None,
                    last_evaluation=self.last_evaluation,
                    source="local",
                    error=error,
                    stale_since=self.stale_since,
                    reason=reason,
                )
            ]
        return [
            replace(i, error=error, stale_since=self.stale_since, reason=reason) for i in self._last
        ]

    def _instance(self, alert: _Active, now: float) -> AlertInstance:
        fires_in = firing_for = None
        if alert.state == "pending":
            fires_in = max(0.0, self.rule.for_s - (now - alert.active_at))
        elif alert.fired_at is not None:
            firing_for = now - alert.fired_at
        return AlertInstance(
            rule=self.rule.name,
            state=alert.state,
            labels=dict(alert.labels),
            value=alert.value,
            active_since=alert.active_at,
            fires_in_s=fires_in,
            firing_for_s=firing_for,
            last_evaluation=now,
            source="local",
        )


def _identity(rule: AlertRule) -> tuple[str, str, str, int]:
    """A rule's identity: its file, group and position (its line), never its name alone:
    kube-prometheus' warning/critical pairs share a group and a name (docs/on-call.md)."""
    return (rule.file, rule.group, rule.name, rule.line)


BATCH_LABEL = "oncall_rule_index"


def batch_expression(exprs: list[str]) -> str:
    """One PromQL query for many rule expressions: each result tagged with its rule's index.

    `or` keeps every element of both sides whose label sets differ, and the index label makes
    every rule's label sets differ from every other rule's.
    """
    return " or ".join(
        f'label_replace(({expr}), "{BATCH_LABEL}", "{index}", "", "")'
        for index, expr in enumerate(exprs)
    )


async def _query_batch(prom: PrometheusClient, exprs: list[str], at: float) -> list[list[Sample]]:
    """Samples per expression, from one instant query for all of them."""
    by_index: list[list[Sample]] = [[] for _ in exprs]
    if not exprs:
        return by_index
    for sample in await prom.query(batch_expression(exprs), at=at):
        labels = dict(sample.labels)
        index = labels.pop(BATCH_LABEL, None)
        if index is not None and index.isdigit() and int(index) < len(exprs):
            by_index[int(index)].append(Sample(labels, sample.timestamp, sample.value))
    return by_index


def _reason(exc: BackendError) -> str:
    return f"{exc.reason}: {exc.detail}" if exc.detail else exc.reason


class LocalEvaluator:
    """A `LocalRuleState` per rule (by file, group, name and line), evaluated together.

    A rule whose definition changes (new `for`, labels) keeps its active instances, as
    Prometheus does on a reload; rules no longer passed in are forgotten.
    """

    def __init__(self) -> None:
        self.states: dict[tuple[str, str, str, int], LocalRuleState] = {}

    def state_of(self, rule: AlertRule) -> LocalRuleState:
        """The state kept for a rule, created on first use."""
        state = self.states.get(_identity(rule))
        if state is None:
            state = self.states[_identity(rule)] = LocalRuleState(rule)
        state.rule = rule
        return state

    async def evaluate(
        self, prom: PrometheusClient, rules: list[AlertRule], now: float | None = None
    ) -> dict[str, list[AlertInstance]]:
        """Query every rule's expression at `now` and advance each rule's state.

        All expressions go in one query (`batch_expression`); when Prometheus rejects it, the
        rules are asked one by one so that a broken expression fails only its own rule.
        Returns instances by rule name (an empty list: inactive). Rules sharing a name (the
        same alert in two groups, or a warning/critical pair in one) share one list, as they
        share `alertname` in Prometheus; each instance carries its own rule's labels.
        """
        at = time.time() if now is None else now
        unique = list({_identity(rule): rule for rule in rules}.values())
        states = [self.state_of(rule) for rule in unique]
        wanted = {_identity(rule) for rule in unique}
        for identity in [i for i in self.states if i not in wanted]:
            del self.states[identity]

        async def one(state: LocalRuleState) -> list[AlertInstance]:
            try:
                samples = await prom.query(state.rule.expr, at=at)
            except BackendError as exc:
                return state.fail(_reason(exc), at, failure_reason(exc))
            return state.evaluate(samples, at)

        try:
            batched = await _query_batch(prom, [state.rule.expr for state in states], at)
        except BackendError as exc:
            if exc.reason != "query error" or len(states) == 1:
                results = [state.fail(_reason(exc), at, failure_reason(exc)) for state in states]
            else:
                # One expression is broken: ask rule by rule, so only that rule fails.
                results = list(await asyncio.gather(*(one(state) for state in states)))
        else:
            results = [state.evaluate(batched[i], at) for i, state in enumerate(states)]
        by_name: dict[str, list[AlertInstance]] = {}
        for rule, instances in zip(unique, results, strict=True):
            by_name.setdefault(rule.name, []).extend(instances)
        return by_name
