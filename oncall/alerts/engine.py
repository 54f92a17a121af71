"""Live states of the golden alerts: one refresh asks each source once.

Per rule the source is `prometheus` when the rule is deployed there (found by name in
`/api/v1/rules`, one request for all rules) and `local` otherwise (an instant query per rule
and the `for` state machine of `local_eval`); the `alerts.source` setting can force either.
Besides the local rules, the same answer lists every rule Prometheus evaluates that
`alerts.from_prometheus` selects (`remote_rules`); they follow the local ones, in
Prometheus' order, and keep their rows while Prometheus cannot be asked.
When a source fails, the affected rules become `unknown` with the reason, and their last
known instances are kept, marked stale since the first failure.
Rules of one group that share a name (kube-prometheus' warning/critical pairs) are each
evaluated (`local_eval` knows a rule by file, group, name and line) and make one row: every
instance of theirs, each with its own rule's labels, under the rule in the most urgent state.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from oncall.alerts.local_eval import LocalEvaluator, overall_state
from oncall.alerts.prom_source import deployed_alerting_rules, instances_of, parse_time
from oncall.alerts.remote_rules import (
    RuleKey,
    deployed_by_key,
    merged,
    remote_rules,
    rule_key,
)
from oncall.alerts.templates import expand_all
from oncall.backends.prometheus import PrometheusClient
from oncall.errors import BackendError
from oncall.model.alerts import (
    AlertInstance,
    AlertRule,
    FailureReason,
    RuleStatus,
    SourceName,
    failure_reason,
)
from oncall.model.matchers import Selection

SourceSetting = Literal["auto", "prometheus", "local"]
#: What one `/api/v1/rules` answer gives: deployed rules by name, remote rules, statuses, and
#: the statuses of `last` these replace (kept alive for the next refresh's worker to free).
Answer = tuple[
    dict[str, dict[str, object]], list[AlertRule], dict[RuleKey, RuleStatus], list[RuleStatus]
]
#: A rule's range query for its sparkline is made at most this often (per rule). The app asks
#: more often (`oncall.tui.app.HISTORY_ASK_EVERY_S`); the asks in between cost no request.
HISTORY_QUERY_EVERY_S = 60.0
#: Which of the rules sharing a row (same group and name) the row shows: the most urgent.
_URGENCY = {"firing": 2, "pending": 1}
HISTORY_SPAN_S = 3600.0
HISTORY_POINTS = 60


@dataclass
class AlertEngine:
    prom: PrometheusClient
    rules: list[AlertRule]
    source: SourceSetting = "auto"
    local: LocalEvaluator = field(default_factory=LocalEvaluator)
    #: Which rules of Prometheus are listed besides `rules`; None: none of them.
    from_prometheus: Selection | None = None
    #: The rules only Prometheus has, as of its last answer.
    remote: list[AlertRule] = field(default_factory=list)
    #: The context (`contexts:`) the statuses are of, set on each as it is built (in the
    #: worker thread) rather than by a copy of each status on the event loop afterwards.
    context: str = ""
    last: dict[RuleKey, RuleStatus] = field(default_factory=dict)
    #: What the last refresh's answers warned of (Thanos: a store that did not answer): a
    #: note beside the states, not an error.
    warnings: list[str] = field(default_factory=list)
    #: Why the last refresh's `/api/v1/rules` request failed (None: it answered, or was not
    #: made): with no rule to mark unknown, it is the only sign that the list is incomplete.
    error: BackendError | None = None
    history: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    _history_at: dict[str, float] = field(default_factory=dict)
    #: The statuses the last refresh replaced in `last`, freed by the next one's worker.
    _retired: list[RuleStatus] = field(default_factory=list)

    async def refresh(self, now: float | None = None) -> list[RuleStatus]:
        """New states for every rule: at most one request for the deployed ones."""
        now = time.time() if now is None else now
        answer: Answer | None = None
        prom_error: BackendError | None = None
        if self.source != "local":
            # Thousands of instances cost hundreds of ms to build: in the worker thread that
            # decodes the answer, so the event loop (the board, key presses) runs meanwhile.
            # Nothing there writes to `self`; it reads `rules`, `source`, `from_prometheus`,
            # `context` and `last`, which nothing changes during a refresh: `last` is
            # written below only, on the loop. What that write replaces is kept alive and
            # freed in the next refresh's worker (`retired`): freeing 5,000 instances is 3-5 ms
            # of CPU that the event loop would spend.
            retired = self._retired
            try:
                answer = await self.prom.rules_built(
                    lambda groups: self._from_groups(groups, now, retired), kind="alert"
                )
            except BackendError as exc:
                prom_error = exc
        if answer is not None:
            deployed, self.remote, statuses, self._retired = answer
        else:
            deployed, statuses = {}, {}
            for rule in self.remote:  # kept from the last answer while Prometheus fails
                statuses[rule_key(rule)] = self._from_prometheus(rule, None, prom_error, now)
        by_local = []
        for rule in self.rules:
            if self._source_of(rule, deployed, prom_error) != "prometheus":
                by_local.append(rule)
            elif answer is None:
                statuses[rule_key(rule)] = self._from_prometheus(rule, None, prom_error, now)
        if by_local:
            local = await self.local.evaluate(self.prom, by_local, now)
            urgency: dict[RuleKey, int] = {}
            for rule in by_local:
                # Rules of one group and name (a warning/critical pair) are one row with all
                # their instances, each with its own rule's labels; the row is the rule in the
                # most urgent state, so a firing warning is not shown as an inactive critical.
                key, own = rule_key(rule), _URGENCY.get(self.local.state_of(rule).state, 0)
                if key not in urgency or own > urgency[key]:
                    urgency[key] = own
                    statuses[key] = self._from_local(rule, local.get(rule.name, []), now)
        self.last.update(statuses)
        self.warnings = self.prom.take_warnings()
        self.error = prom_error
        keys = dict.fromkeys(rule_key(rule) for rule in [*self.rules, *self.remote])
        return [statuses[key] for key in keys]

    def _from_groups(
        self, groups: list[dict[str, Any]], now: float, retired: list[RuleStatus]
    ) -> Answer:
        """What one `/api/v1/rules` answer says: the deployed rules by name, the remote rules,
        the statuses of the rules Prometheus evaluates and those of `last` they replace (runs
        in a worker thread; `retired`, the last refresh's, are let go here)."""
        retired.clear()
        deployed: dict[str, dict[str, object]] = deployed_alerting_rules(groups)
        by_key = deployed_by_key(groups)
        remote = remote_rules(by_key, self.rules, self.from_prometheus)
        statuses: dict[RuleKey, RuleStatus] = {}
        for rule in self.rules:
            if self._source_of(rule, deployed, None) == "prometheus":
                # Every rule of its group and name (a warning/critical pair), else by name.
                same = by_key.get(rule_key(rule))
                found = merged(same) if same else deployed.get(rule.name)
                key = rule_key(rule)
                # The row is the local rule Prometheus' most urgent one is (by its labels).
                if key in statuses and found and found.get("labels") != rule.labels:
                    continue
                statuses[key] = self._from_prometheus(rule, found, None, now)
        for rule in remote:
            raws = by_key.get(rule_key(rule))
            found = merged(raws) if raws else None
            statuses[rule_key(rule)] = self._from_prometheus(rule, found, None, now)
        last = self.last
        return deployed, remote, statuses, [last[key] for key in statuses if key in last]

    def _source_of(
        self, rule: AlertRule, deployed: Mapping[str, object], error: BackendError | None
    ) -> SourceName:
        if self.source != "auto":
            return self.source
        if error is not None:
            # Which rules Prometheus has is unknown now: keep each rule's last source.
            previous = self.last.get(rule_key(rule))
            return previous.source if previous else "local"
        return "prometheus" if rule.name in deployed else "local"

    def _from_prometheus(
        self,
        rule: AlertRule,
        found: dict[str, object] | None,
        error: BackendError | None,
        now: float,
    ) -> RuleStatus:
        if error is not None:
            text = f"{error.reason}: {error.detail}"
            return self._stale(rule, "prometheus", text, failure_reason(error), now)
        if found is None:
            return RuleStatus(rule, "prometheus", "unknown", (), error="not deployed to Prometheus",
                              context=self.context)  # fmt: skip
        instances = instances_of(dict(found), now)
        # Prometheus reports lastEvaluation for every rule, an inactive one (no alerts) too.
        last = found.get("lastEvaluation")
        last_eval = parse_time(last) if isinstance(last, str) else None
        # A rule whose last evaluation failed keeps the state Prometheus reports (its alerts
        # stay as they were: Prometheus neither resolves nor adds any), with its health.
        health = found.get("health")
        last_error = str(found.get("lastError") or "") if health == "err" else ""
        failed = "evaluation failed" + (f": {last_error}" if last_error else "")
        return RuleStatus(
            rule,
            "prometheus",
            overall_state(instances),
            tuple(instances),
            error=failed if health == "err" else None,
            last_evaluation=last_eval,
            health=str(health) if isinstance(health, str) else None,
            last_error=last_error or None,
            context=self.context,
        )

    def _from_local(
        self, rule: AlertRule, instances: list[AlertInstance], now: float
    ) -> RuleStatus:
        errors = [i for i in instances if i.error]
        if errors:
            stale = [i.stale_since for i in errors if i.stale_since is not None]
            return RuleStatus(
                rule,
                "local",
                "unknown",
                tuple(i for i in instances if i.state != "unknown"),
                error=errors[0].error,
                reason=errors[0].reason,
                stale_since=min(stale) if stale else None,
                last_evaluation=self._last_eval(rule),
                context=self.context,
            )
        # Annotations expanded as Prometheus does: `$labels` are the expression's labels,
        # without the rule's own (an instance's labels have them set over the result's).
        instances = [
            replace(i, annotations=expand_all(rule.annotations, {
                k: v for k, v in i.labels.items() if rule.labels.get(k) != v}, i.value))
            for i in instances
        ]  # fmt: skip
        # An inactive rule (no instance) was evaluated all the same, at `now`.
        last_eval = instances[0].last_evaluation if instances else now
        return RuleStatus(rule, "local", overall_state(instances), tuple(instances),
                          last_evaluation=last_eval, context=self.context)  # fmt: skip

    def _last_eval(self, rule: AlertRule) -> float | None:
        previous = self.last.get(rule_key(rule))
        return previous.last_evaluation if previous else None

    def _stale(
        self, rule: AlertRule, source: SourceName, text: str, reason: FailureReason, now: float
    ) -> RuleStatus:
        previous = self.last.get(rule_key(rule))
        stale_since = previous.stale_since if previous and previous.stale_since else now
        instances = tuple(
            replace(i, stale_since=stale_since, error=text, reason=reason)
            for i in previous.instances
        ) if previous else ()  # fmt: skip
        return RuleStatus(
            rule, source, "unknown", instances, error=text, stale_since=stale_since,
            last_evaluation=previous.last_evaluation if previous else None, reason=reason,
            context=self.context,
        )  # fmt: skip

    async def refresh_history(self, now: float | None = None) -> None:
        """Range queries for sparklines: per rule at most once a minute, ~60 points an hour.

        Only for the local rules: hundreds of rules from Prometheus would be hundreds of range
        queries a minute against the team's Prometheus; their rows show no sparkline."""
        now = time.time() if now is None else now
        due = [
            r
            for r in self.rules
            if now - self._history_at.get(r.name, -math.inf) >= HISTORY_QUERY_EVERY_S
        ]
        step = HISTORY_SPAN_S / HISTORY_POINTS
        results = await asyncio.gather(
            *(
                self.prom.query_range(r.expr, start=now - HISTORY_SPAN_S, end=now, step=step)
                for r in due
            ),
            return_exceptions=True,
        )
        for rule, result in zip(due, results, strict=True):
            if isinstance(result, BackendError):
                continue  # keep the old history; the state shows the error
            if isinstance(result, BaseException):
                raise result
            points: dict[float, float] = {}
            for series in result:
                for ts, value in series.points:
                    points[ts] = max(value, points.get(ts, -math.inf))
            self.history[rule.name] = sorted(points.items())
            self._history_at[rule.name] = now
