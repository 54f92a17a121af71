"""PrometheusRule objects (single, multi-document, List) load like plain rule files."""

from __future__ import annotations

from pathlib import Path

from oncall.alerts.loader import load_rule_files

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rules" / "kube-prometheus"

OBJECT = """\
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {name}
  namespace: monitoring
spec:
  groups:
  - name: {name}
    rules:
    - alert: {alert}
      expr: up == 0
      for: 5m
      labels:
        severity: warning
"""


def test_the_kube_prometheus_manifests_load_every_alerting_rule() -> None:
    rules = load_rule_files([FIXTURES])
    assert rules.problems == []
    assert len(rules.files) == 8
    names = {r.name for r in rules.rules}
    assert {"Watchdog", "KubePodCrashLooping", "KubePodNotReady"} <= names
    assert len(rules.rules) > 100 and rules.recording > 50
    crash = next(r for r in rules.rules if r.name == "KubePodCrashLooping")
    assert crash.group == "kubernetes-apps" and crash.for_s == 900
    assert crash.file.endswith("kubernetesControlPlane-prometheusRule.yaml")


def test_a_multi_document_file_and_a_list_load(tmp_path: Path) -> None:
    multi = tmp_path / "multi.yaml"
    multi.write_text(
        OBJECT.format(name="a", alert="A") + "---\n" + OBJECT.format(name="b", alert="B")
    )
    items = "".join(
        "- " + OBJECT.format(name=n, alert=n.upper()).replace("\n", "\n  ").rstrip() + "\n"
        for n in ("c", "d")
    )
    listed = tmp_path / "list.yaml"
    listed.write_text(f"apiVersion: v1\nkind: List\nitems:\n{items}")
    rules = load_rule_files([multi, listed])
    assert rules.problems == []
    assert [(r.name, r.group) for r in rules.rules] == [("A", "a"), ("B", "b"), ("C", "c"),
                                                         ("D", "d")]  # fmt: skip
    # Group names are unique per object, as the operator renders one rule file per object.
    same = tmp_path / "same.yaml"
    same.write_text(
        OBJECT.format(name="x", alert="X") + "---\n" + OBJECT.format(name="x", alert="Y")
    )
    assert load_rule_files([same]).problems == []


def test_a_broken_object_is_reported_at_its_file_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = OBJECT.format(name="a", alert="A") + "---\n" + OBJECT.format(name="b", alert="B")
    bad.write_text(text.replace("      expr: up == 0\n", "", 1).replace("5m", "5 minutes"))
    problems = load_rule_files([bad]).problems
    located = [(p.file, p.line, p.col, p.key) for p in problems]
    assert located == [
        (str(bad), 10, 7, "spec.groups.0.rules.0.expr"),  # the rule that lacks it
        (str(bad), 11, 12, "spec.groups.0.rules.0.for"),
        (str(bad), 26, 12, "spec.groups.0.rules.0.for"),  # the second object, its own line
    ]


def test_another_kind_or_api_version_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "cm.yaml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\ndata: {}\n")
    (problem,) = load_rule_files([bad]).problems
    assert (problem.line, problem.col, problem.key) == (2, 7, "kind")
    assert "ConfigMap" in problem.message and "PrometheusRule" in problem.message
    old = tmp_path / "old.yaml"
    old.write_text(OBJECT.format(name="a", alert="A").replace("/v1", "/v1beta1"))
    (problem,) = load_rule_files([old]).problems
    assert (problem.line, problem.key) == (1, "apiVersion")
