"""Annotation templates: the Go-template subset, checked at load, expanded as Prometheus does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from oncall.alerts.engine import AlertEngine
from oncall.alerts.loader import load_rule_files
from oncall.alerts.templates import TemplateError, parse
from oncall.backends.prometheus import PrometheusClient
from oncall.service.checklists import alert_facts
from tests.harness.servers import RunningServer
from tests.harness.waiting import wait_until

RULES = """\
groups:
- name: t
  rules:
  - alert: Stuck
    expr: >-
      label_replace(label_replace(vector(4000), "pod", "vllm-0", "", ""),
      "namespace", "ai", "", "")
    labels: {severity: "{{ $labels.namespace }}-page"}
    annotations:
      summary: "{{ $labels.namespace }}/{{ $labels.pod }} stuck for {{ $value | humanizeDuration }}"
      description: >-
        {{ with $labels.cluster }}on {{ . }}{{ else }}no cluster{{ end }},
        {{ printf "%.1f" $value }}
"""


@pytest.mark.parametrize(
    ("template", "value", "expected"),
    [  # Expected texts from Prometheus' template/template_test.go.
        ("{{ humanize 1234567.0 }}", 0, "1.235M"),
        ("{{ humanize 0.012345 }}", 0, "12.35m"),
        ("{{ humanize 0 }}", 0, "0"),
        ("{{ $value | humanize1024 }}", 1048576, "1Mi"),
        ("{{ humanizeDuration 0 }}", 0, "0s"),
        ("{{ humanizeDuration 0.1 }}", 0, "100ms"),
        ("{{ humanizeDuration 60 }}", 0, "1m 0s"),
        ("{{ humanizeDuration 3600 }}", 0, "1h 0m 0s"),
        ("{{ humanizeDuration 1234567 }}", 0, "14d 6h 56m 7s"),
        ('{{ "43200" | humanizeDuration }}', 0, "12h 0m 0s"),
        ("{{ $value | humanizePercentage }}", 0.1234567, "12.35%"),
        ('{{ printf "%.2f" $value }}', 2.5, "2.50"),
        ('{{ $value | printf "%.0f" }}', 2.6, "3"),
        ("{{ $value }}", 3.0, "3"),
        ("{{ $labels.missing }}|", 0, "|"),
        ('{{ or $labels.none "fallback" }}', 0, "fallback"),
        ("{{ if gt $value 1.0 }}big{{ else }}small{{ end }}", 2, "big"),
        ("a {{- $labels.x -}} b", 0, "ayb"),
        ("{{ $v := $value }}{{ $v | humanize }}", 2000, "2k"),
        ("{{ toUpper $labels.x }}", 0, "Y"),
    ],
)
def test_functions_expand_as_prometheus_expands_them(
    template: str, value: float, expected: str
) -> None:
    assert parse(template).render({"x": "y"}, value) == expected


def test_an_unknown_function_is_a_located_error_at_load(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match='function "humanise" not defined'):
        parse("{{ $value | humanise }}")
    bad = tmp_path / "bad.yaml"
    bad.write_text(RULES.replace("humanizeDuration", "humanise"))
    (problem,) = load_rule_files([bad]).problems
    assert (problem.line, problem.col, problem.key) == (
        10,
        16,
        "groups.0.rules.0.annotations.summary",
    )
    assert 'function "humanise" not defined (at offset' in problem.message
    ranged = tmp_path / "range.yaml"
    ranged.write_text(RULES.replace("{{ with $labels.cluster }}", "{{ range $labels }}"))
    (problem,) = load_rule_files([ranged]).problems
    assert "range" in problem.message and (problem.line, problem.col) == (11, 20)  # the ">-"


def test_every_shipped_and_kube_prometheus_template_parses() -> None:
    root = Path(__file__).resolve().parents[2]
    rules = load_rule_files([root / "alerts", root / "fixtures" / "rules" / "kube-prometheus"])
    assert rules.problems == []


def test_local_evaluation_expands_the_instances_annotations_and_audit_facts_carry_them(
    prometheus_srv: RunningServer, tmp_path: Path
) -> None:
    (tmp_path / "r.yaml").write_text(RULES)
    rules = load_rule_files([tmp_path / "r.yaml"]).rules

    async def refresh() -> list[object]:
        async with PrometheusClient(prometheus_srv.url, timeout=5) as prom:
            return list(await AlertEngine(prom, rules, source="local").refresh())

    (status,) = asyncio.run(refresh())
    (instance,) = status.instances  # type: ignore[attr-defined]
    assert instance.annotations == {
        "summary": "ai/vllm-0 stuck for 1h 6m 40s",
        "description": "no cluster, 4000.0",
    }
    facts = alert_facts("Stuck", status)  # type: ignore[arg-type]
    assert facts["annotations"]["summary"] == "ai/vllm-0 stuck for 1h 6m 40s"


def test_prometheus_evaluated_rules_show_prometheus_own_expansion(
    start_prometheus: object, tmp_path: Path
) -> None:
    (tmp_path / "r.yaml").write_text(RULES.replace("stuck for", "stuck (prometheus) for"))
    server: RunningServer = start_prometheus(rule_files=[tmp_path / "r.yaml"])  # type: ignore[operator]
    rules = load_rule_files([tmp_path / "r.yaml"]).rules

    async def refresh() -> object:
        async with PrometheusClient(server.url, timeout=5) as prom:
            (status,) = await AlertEngine(prom, rules, source="prometheus").refresh()
            return status

    def firing() -> bool:
        return getattr(asyncio.run(refresh()), "state", "") == "firing"

    wait_until(firing, within=30, what="the rule firing in Prometheus")
    status = asyncio.run(refresh())
    (instance,) = status.instances  # type: ignore[attr-defined]
    assert instance.annotations["summary"] == "ai/vllm-0 stuck (prometheus) for 1h 6m 40s"
    assert instance.annotations["description"] == "no cluster, 4000.0"
