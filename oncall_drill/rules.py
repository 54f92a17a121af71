"""Deploy alert rule files to the drill's Prometheus, with `for` durations scaled.

A `for: 2m` alert makes a drill wait two minutes; `drill up --for-scale 0.05` deploys a copy
of every rule file with `for` and `keep_firing_for` multiplied by 0.05 (2m → 6s), and the
expressions' windows with them (`rate(x[5m])` → `[60s]`: `oncall.promql_windows`), so packs
written for a one-minute scrape interval still trip within seconds. The same scale goes into
the app's `oncall.yaml` (`alerts.for_scale`), so the app's own evaluation and Prometheus agree.
Everything else in the files is kept as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from oncall import promql_windows
from oncall_drill.components import DrillError

SCALED_KEYS = ("for", "keep_firing_for")


def duration_seconds(text: str) -> float:
    """Seconds of a Prometheus duration ("1m30s", "250ms", "0s")."""
    # The same grammar as a rule expression's ranges; the error names what a rule file holds.
    try:
        return float(promql_windows.duration_seconds(text))
    except ValueError:
        raise ValueError(f"not a Prometheus duration: {text!r}") from None


def format_duration(seconds: float) -> str:
    """A Prometheus duration for seconds, to the millisecond ("6s", "1500ms", "0s")."""
    # Not promql_windows.format_duration: that one never writes less than 1ms (a range cannot
    # be empty), and `for: 0s` (fire at once) must stay 0s.
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def scale_duration(text: str, scale: float) -> str:
    return format_duration(duration_seconds(text) * scale)


def scale_rules(document: dict[str, Any], scale: float) -> dict[str, Any]:
    """The rule-file document with every rule's durations and windows scaled (in place)."""
    for group in document.get("groups") or []:
        for rule in group.get("rules") or []:
            if not isinstance(rule, dict):
                continue
            for key in SCALED_KEYS:
                if isinstance(rule.get(key), str):
                    rule[key] = scale_duration(rule[key], scale)
            if isinstance(rule.get("expr"), str):
                rule["expr"] = promql_windows.scale_windows(rule["expr"], scale)
    return document


def rule_files(sources: list[Path]) -> list[Path]:
    """The *.yaml / *.yml rule files named by sources (files, or folders of them)."""
    found: list[Path] = []
    for source in sources:
        if source.is_dir():
            found.extend(sorted(p for p in source.iterdir() if p.suffix in (".yaml", ".yml")))
        elif source.is_file():
            found.append(source)
        else:
            raise DrillError(f"rule file or folder not found: {source}")
    return found


def deploy_rules(sources: list[Path], target: Path, scale: float) -> list[Path]:
    """Write a scaled copy of each rule file into target; return the copies."""
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for path in rule_files(sources):
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            if not isinstance(document, dict):
                raise DrillError(f"{path}: not a Prometheus rule file (no groups)")
            scaled = scale_rules(document, scale)
        except (yaml.YAMLError, ValueError) as exc:
            raise DrillError(f"{path}: {exc}") from exc
        copy = target / f"{path.stem}.yaml"
        header = f"# Deployed by `oncall drill up` from {path}, for durations x {scale:g}.\n"
        copy.write_text(header + yaml.safe_dump(scaled, sort_keys=False, allow_unicode=True))
        written.append(copy)
    return written


# -- the fleet's rules (`drill up --fleet`) ------------------------------------------------------

FLEET_RULES_FILE = "fleet.yaml"
#: (alert suffix, expression over one Deployment's pods `{sel}`, for, severity, summary).
_FLEET_TEMPLATES = (
    ("PodNotReady", 'kube_pod_status_ready{{{sel}, condition="false"}} == 1', "5m", "warning",
     "Pod {{{{ $labels.pod }}}} is not ready"),
    ("PodRestarting", "kube_pod_container_status_restarts_total{{{sel}}} > 3", "0s", "warning",
     "Container {{{{ $labels.container }}}} of {{{{ $labels.pod }}}} restarted more than 3 times"),
    ("RestartsIncreasing", "increase(kube_pod_container_status_restarts_total{{{sel}}}[15m]) > 0",
     "5m", "warning", "Pod {{{{ $labels.pod }}}} keeps restarting"),
    ("OOMKilled",
     'kube_pod_container_status_last_terminated_reason{{{sel}, reason="OOMKilled"}} == 1', "0s",
     "warning", "Container {{{{ $labels.container }}}} of {{{{ $labels.pod }}}} was OOM-killed"),
    ("PodPending", 'kube_pod_status_phase{{{sel}, phase="Pending"}} == 1', "10m", "warning",
     "Pod {{{{ $labels.pod }}}} is Pending"),
    ("PodFailed", 'kube_pod_status_phase{{{sel}, phase="Failed"}} == 1', "0s", "warning",
     "Pod {{{{ $labels.pod }}}} failed"),
    ("PodStatusUnknown", 'kube_pod_status_ready{{{sel}, condition="unknown"}} == 1', "5m",
     "warning", "Pod {{{{ $labels.pod }}}} reports no readiness"),
    ("ReplicasBelowTarget", 'count(kube_pod_status_ready{{{sel}, condition="true"}} == 1) < {n}',
     "10m", "warning", "Fewer than {n} ready pods"),
    ("PodsAbsent", "absent(kube_pod_status_phase{{{sel}}})", "5m", "critical",
     "No pod reports a phase"),
    # Info, and loud on purpose: one instance per Running pod, so that the board holds the
    # instance count of a big fleet (thousands), as info-level inventory alerts do.
    ("PodRunning", 'kube_pod_status_phase{{{sel}, phase="Running"}} == 1', "0s", "info",
     "Pod {{{{ $labels.pod }}}} is running"),
)  # fmt: skip


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("_", "-").split("-"))


def fleet_rules(workloads: list[tuple[str, str, int]]) -> dict[str, Any]:
    """The fleet's rule file: ten alerting rules per Deployment (namespace, name, replicas) over
    its kube-state-metrics series, one group per namespace (20 Deployments: 200 rules)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for namespace, name, replicas in workloads:
        sel = f'namespace="{namespace}", pod=~"{name}-[a-z0-9]+-[a-z0-9]+"'
        for suffix, expr, for_, severity, summary in _FLEET_TEMPLATES:
            groups.setdefault(namespace, []).append(
                {
                    "alert": f"{_camel(name)}{suffix}",
                    "expr": expr.format(sel=sel, n=replicas),
                    "for": for_,
                    "labels": {"severity": severity, "deployment": name, "team": namespace},
                    "annotations": {"summary": summary.format(n=replicas)},
                }
            )
    return {
        "groups": [
            {"name": f"fleet-{namespace}", "interval": "15s", "rules": rules}
            for namespace, rules in groups.items()
        ]
    }


def deploy_fleet_rules(target: Path, scale: float, workloads: list[tuple[str, str, int]]) -> Path:
    """Write the fleet's rule file (durations scaled) into target."""
    target.mkdir(parents=True, exist_ok=True)
    path = target / FLEET_RULES_FILE
    header = f"# Deployed by `oncall drill up --fleet`, for durations x {scale:g}.\n"
    document = scale_rules(fleet_rules(workloads), scale)
    path.write_text(header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    return path
