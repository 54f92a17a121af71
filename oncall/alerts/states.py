"""A refresh's rule states, built once each: pure functions of (the `/api/v1/rules` groups,
the rules, the previous states, now, the context, and what Alertmanager and the
acknowledgements say).

Nothing here waits, starts a thread or keeps state: the refresh stage (docs/architecture.md,
"The alert route") calls `from_groups` in its one worker thread, and the engine the others
for the rules evaluated here and for a Prometheus that could not be asked. Each status and
instance is made once, with its routing and acknowledgement (`oncall.alerts.join`), not copied
afterwards: at 5,000 firing instances a copy of each was milliseconds of the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from oncall.alerts.join import Join, Joiner
from oncall.alerts.local_eval import overall_state
from oncall.alerts.prom_source import deployed_alerting_rules, instances_of, parse_time
from oncall.alerts.remote_rules import RuleKey, deployed_by_key, merged, remote_rules, rule_key
from oncall.alerts.templates import expand_all
from oncall.errors import BackendError
from oncall.model.alertmanager import InstanceRouting
from oncall.model.alerts import (
    AlertInstance,
    AlertRule,
    AlertStateName,
    FailureReason,
    RuleStatus,
    SourceName,
    failure_reason,
)
from oncall.model.matchers import Selection

NO_JOIN = Joiner(Join())


@dataclass(frozen=True)
class Built:
    """What one `/api/v1/rules` answer gives: the deployed rules by name, the rules only
    Prometheus has, and the statuses of the rules Prometheus evaluates."""

    deployed: dict[str, dict[str, Any]]
    remote: list[AlertRule]
    statuses: dict[RuleKey, RuleStatus]


def source_of(
    rule: AlertRule,
    setting: SourceName | str,
    deployed: Mapping[str, object],
    error: BackendError | None,
    previous: Mapping[RuleKey, RuleStatus],
) -> SourceName:
    """Where a rule's state comes from: the setting, else Prometheus when it has the rule;
    with Prometheus unreachable, the rule's last source (which rules it has is unknown)."""
    if setting in ("prometheus", "local"):
        return "prometheus" if setting == "prometheus" else "local"
    if error is not None:
        last = previous.get(rule_key(rule))
        return last.source if last else "local"
    return "prometheus" if rule.name in deployed else "local"


def from_groups(
    groups: list[dict[str, Any]],
    rules: list[AlertRule],
    previous: Mapping[RuleKey, RuleStatus],
    now: float,
    *,
    context: str,
    setting: SourceName | str,
    from_prometheus: Selection | None,
    joiner: Joiner = NO_JOIN,
) -> Built:
    """The statuses of the rules Prometheus evaluates, from its `/api/v1/rules` groups."""
    deployed: dict[str, dict[str, Any]] = deployed_alerting_rules(groups)
    by_key = deployed_by_key(groups)
    remote = remote_rules(by_key, rules, from_prometheus)
    statuses: dict[RuleKey, RuleStatus] = {}
    for rule in rules:
        if source_of(rule, setting, deployed, None, previous) == "prometheus":
            # Every rule of its group and name (a warning/critical pair), else by name.
            key = rule_key(rule)
            same = by_key.get(key)
            found = merged(same) if same else deployed.get(rule.name)
            # The row is the local rule Prometheus' most urgent one is (by its labels).
            if key in statuses and found and found.get("labels") != rule.labels:
                continue
            statuses[key] = from_prometheus_rule(rule, found, now, context, joiner)
    for rule in remote:
        raws = by_key.get(rule_key(rule))
        found = merged(raws) if raws else None
        statuses[rule_key(rule)] = from_prometheus_rule(rule, found, now, context, joiner)
    return Built(deployed, remote, statuses)


def _status(
    rule: AlertRule,
    source: SourceName,
    instances: tuple[AlertInstance, ...],
    routings: list[InstanceRouting] | None,
    joiner: Joiner,
    *,
    state: AlertStateName | None = None,
    context: str,
    **fields: Any,
) -> RuleStatus:
    """The one construction of a status, with its routing and acknowledgement."""
    shown = state if state is not None else overall_state(list(instances))
    routing = joiner.rule_routing(rule.name, shown, routings)
    return RuleStatus(rule, source, shown, instances, routing=routing, context=context,
                      **fields)  # fmt: skip


def from_prometheus_rule(
    rule: AlertRule, found: dict[str, Any] | None, now: float, context: str, joiner: Joiner
) -> RuleStatus:
    """One rule's status as Prometheus reports it (`found`: its rule object; None: it does
    not evaluate it)."""
    if found is None:
        return _status(rule, "prometheus", (), None, joiner, state="unknown", context=context,
                       error="not deployed to Prometheus")  # fmt: skip
    routings: list[InstanceRouting] = []

    def route(firing: list[dict[str, str]]) -> list[InstanceRouting] | None:
        found_routings = joiner.routings(rule.name, firing)
        routings.extend(found_routings or ())
        return found_routings

    instances = instances_of(found, now, route=route if joiner.snapshot is not None else None)
    # Prometheus reports lastEvaluation for every rule, an inactive one (no alerts) too.
    last = found.get("lastEvaluation")
    last_eval = parse_time(last) if isinstance(last, str) else None
    # A rule whose last evaluation failed keeps the state Prometheus reports (its alerts
    # stay as they were: Prometheus neither resolves nor adds any), with its health.
    health = found.get("health")
    last_error = str(found.get("lastError") or "") if health == "err" else ""
    failed = "evaluation failed" + (f": {last_error}" if last_error else "")
    return _status(
        rule, "prometheus", tuple(instances), routings or None, joiner, context=context,
        error=failed if health == "err" else None, last_evaluation=last_eval,
        health=str(health) if isinstance(health, str) else None, last_error=last_error or None,
    )  # fmt: skip


def from_local(
    rule: AlertRule,
    instances: list[AlertInstance],
    previous: RuleStatus | None,
    now: float,
    *,
    context: str,
    joiner: Joiner = NO_JOIN,
) -> RuleStatus:
    """One rule's status as evaluated here (`oncall.alerts.local_eval`'s instances)."""
    errors = [i for i in instances if i.error]
    if errors:
        stale = [i.stale_since for i in errors if i.stale_since is not None]
        kept = [i for i in instances if i.state != "unknown"]
        routed, routings = _routed(rule, kept, joiner)
        return _status(
            rule, "local", tuple(routed), routings, joiner, state="unknown", context=context,
            error=errors[0].error, reason=errors[0].reason,
            stale_since=min(stale) if stale else None,
            last_evaluation=previous.last_evaluation if previous else None,
        )  # fmt: skip
    # Annotations expanded as Prometheus does: `$labels` are the expression's labels,
    # without the rule's own (an instance's labels have them set over the result's); the
    # routing set in the same copy.
    firing = [i.labels for i in instances if i.state == "firing"]
    routings = joiner.routings(rule.name, firing)
    order = iter(routings or ())
    expanded = tuple(
        replace(i, annotations=expand_all(rule.annotations, {
            k: v for k, v in i.labels.items() if rule.labels.get(k) != v}, i.value),
            routing=next(order) if routings and i.state == "firing" else i.routing)
        for i in instances
    )  # fmt: skip
    # An inactive rule (no instance) was evaluated all the same, at `now`.
    last_eval = expanded[0].last_evaluation if expanded else now
    return _status(rule, "local", expanded, routings, joiner, context=context,
                   last_evaluation=last_eval)  # fmt: skip


def stale(
    rule: AlertRule,
    source: SourceName,
    error: BackendError,
    previous: RuleStatus | None,
    now: float,
    *,
    context: str,
    joiner: Joiner = NO_JOIN,
) -> RuleStatus:
    """A rule whose source could not be asked: `unknown`, its last instances kept, stale
    since the first failure."""
    text = f"{error.reason}: {error.detail}"
    reason: FailureReason = failure_reason(error)
    stale_since = previous.stale_since if previous and previous.stale_since else now
    kept = list(previous.instances) if previous else []
    firing = [i.labels for i in kept if i.state == "firing"]
    routings = joiner.routings(rule.name, firing)
    order = iter(routings or ())
    instances = tuple(
        replace(i, stale_since=stale_since, error=text, reason=reason,
                routing=next(order) if routings and i.state == "firing" else i.routing)
        for i in kept
    )  # fmt: skip
    return _status(
        rule, source, instances, routings, joiner, state="unknown", context=context, error=text,
        stale_since=stale_since, reason=reason,
        last_evaluation=previous.last_evaluation if previous else None,
    )  # fmt: skip


def _routed(
    rule: AlertRule, instances: list[AlertInstance], joiner: Joiner
) -> tuple[list[AlertInstance], list[InstanceRouting] | None]:
    firing = [i.labels for i in instances if i.state == "firing"]
    routings = joiner.routings(rule.name, firing)
    if not routings:
        return instances, None
    order = iter(routings)
    return [replace(i, routing=next(order)) if i.state == "firing" else i
            for i in instances], routings  # fmt: skip
