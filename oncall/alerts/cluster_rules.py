"""`alerts.prometheus_rules: cluster`: the PrometheusRule objects of the cluster, as rules.

Equivalent of `kubectl get prometheusrules.monitoring.coreos.com -A [-l SEL] -o yaml` (or
`-n NS`): one list request through the Kubernetes API, read-only (RBAC: get, list on
`prometheusrules` in the `monitoring.coreos.com` group). Each object is checked as a rule file
would be; a problem names the object (`prometheusrule/NS/NAME`) and the LINE:COL in the object
as `kubectl get prometheusrule NAME -n NS -o yaml` prints it (server fields left out).
"""

from __future__ import annotations

from typing import Any

import yaml

from oncall.alerts.loader import RuleSet, load_rule_text
from oncall.backends.kube import KubeReader
from oncall.errors import Problem
from oncall.model.alerts import AlertRule


def _shown(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without the fields the server manages, as `kubectl get -o yaml` shows it."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": meta}  # fmt: skip


def rules_of_objects(objects: list[dict[str, Any]], *, for_scale: float = 1.0) -> RuleSet:
    rules: list[AlertRule] = []
    problems: list[Problem] = []
    recording = 0
    for obj in objects:
        meta = obj.get("metadata") or {}
        display = f"prometheusrule/{meta.get('namespace', '')}/{meta.get('name', '')}"
        text = yaml.safe_dump(_shown(obj), sort_keys=False)
        found = load_rule_text(text, display, for_scale=for_scale)
        rules.extend(found.rules)
        problems.extend(found.problems)
        recording += found.recording
    return RuleSet(rules=rules, recording=recording, files=[], problems=problems)


async def cluster_rules(
    reader: KubeReader,
    namespace: str | None,
    label_selector: str | None,
    *,
    for_scale: float = 1.0,
) -> RuleSet:
    """The rules of every PrometheusRule in `namespace` (None: all) matching the selector."""
    objects = await reader.list_prometheus_rules(namespace, label_selector or None)
    return rules_of_objects(objects, for_scale=for_scale)
