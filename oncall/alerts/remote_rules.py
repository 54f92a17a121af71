"""Every alerting rule Prometheus evaluates, as `AlertRule` values, from `/api/v1/rules`.

The setting `alerts.from_prometheus` (`all`, `none` or label matchers) selects which of them
the board lists beside the local packs. They come from the one `/api/v1/rules` request the
engine already makes, so listing them costs no request. Thanos Query and Mimir (under its
`/prometheus` prefix) serve the same payload: groups with `name`, `file` and `rules`, each
alerting rule with `name`, `query`, `duration`, `labels`, `annotations` and `alerts`.

A rule is known by its group and name: the rules of one group with the same name (Prometheus
allows them; kube-prometheus has `KubeAPIErrorBudgetBurn` four times with different windows,
and warning/critical pairs) are one row whose instances are all of theirs, each carrying its
own rule's labels as Prometheus reports them; the row's own fields (severity, expression) are
those of the rule in the most urgent state (firing, then pending, then the first). A local
rule of the same name is that row, its file giving the runbook and the position.
"""

from __future__ import annotations

from typing import Any

from oncall.model.alerts import AlertRule
from oncall.model.matchers import Selection

RuleKey = tuple[str, str]  # (group, name)


def rule_key(rule: AlertRule) -> RuleKey:
    return (rule.group, rule.name)


def _labels(raw: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def _seconds(raw: object) -> float:
    try:
        return float(str(raw or 0))
    except ValueError:
        return 0.0


def deployed_by_key(groups: list[dict[str, Any]]) -> dict[RuleKey, list[dict[str, Any]]]:
    """The alerting rules of `/api/v1/rules` groups by (group, name), in Prometheus' order."""
    found: dict[RuleKey, list[dict[str, Any]]] = {}
    for group in groups:
        for rule in group.get("rules") or []:
            if rule.get("type") == "alerting" and rule.get("name"):
                key = (str(group.get("name") or ""), str(rule["name"]))
                found.setdefault(key, []).append({**rule, "_file": group.get("file") or ""})
    return found


_URGENCY = {"firing": 2, "pending": 1}


def merged(rules: list[dict[str, Any]]) -> dict[str, Any]:
    """One rule object for several of the same group and name: the fields of the one in the
    most urgent state (the first of those), every one's alerts, the latest evaluation, the
    first error."""
    if len(rules) == 1:
        return rules[0]
    urgent = max(rules, key=lambda r: _URGENCY.get(str(r.get("state")), 0))
    first = dict(urgent)
    first["alerts"] = [a for r in rules for a in (r.get("alerts") or [])]
    first["lastEvaluation"] = max(str(r.get("lastEvaluation") or "") for r in rules)
    bad = next((r for r in rules if r.get("health") == "err"), None)
    if bad is not None:
        first["health"], first["lastError"] = "err", bad.get("lastError")
    return first


def as_rule(key: RuleKey, raw: dict[str, Any]) -> AlertRule:
    """An AlertRule for a rule only Prometheus has; `file` is Prometheus' own rule file and
    `line` 0 (Prometheus does not report lines)."""
    return AlertRule(
        name=key[1],
        expr=str(raw.get("query") or ""),
        group=key[0],
        file=str(raw.get("_file") or "prometheus"),
        line=0,
        for_s=_seconds(raw.get("duration")),
        keep_firing_for_s=_seconds(raw.get("keepFiringFor")),
        labels=_labels(raw.get("labels")),
        annotations=_labels(raw.get("annotations")),
    )


def selected(rule: AlertRule, selection: Selection) -> bool:
    """Whether `alerts.from_prometheus` lists this rule: its labels and `alertname`."""
    return selection.matches({**rule.labels, "alertname": rule.name}, rule.name)


def remote_rules(
    deployed: dict[RuleKey, list[dict[str, Any]]],
    local: list[AlertRule],
    selection: Selection | None,
) -> list[AlertRule]:
    """The rules Prometheus evaluates that the board lists besides the local ones: those the
    selection matches (None: `none`), minus those a local rule stands for (same group and
    name, or same name: the engine finds a local rule's state by its name)."""
    if selection is None:
        return []
    local_names = {r.name for r in local}
    local_keys = {rule_key(r) for r in local}
    result = []
    for key, raws in deployed.items():
        if key in local_keys or key[1] in local_names:
            continue
        rule = as_rule(key, merged(raws))
        if selected(rule, selection):
            result.append(rule)
    return result
