"""`oncall runbook new ALERT`: a starter runbook written from the alerting rule, and its test.

The runbook names the schema on its first line (editors complete and check it), belongs to
the alert by name, and has one step: the rule's own expression as a `prometheus.query`, which
is healthy when it returns nothing — the alert's condition, re-checked at the time of the run.
Its test file (`tests/ALERT.test.yaml`) holds two cases in the shape `oncall runbook test`
runs: the expression returning a sample (fail) and nothing (ok). Authors then add steps.
"""

from __future__ import annotations

import json
import re

from oncall.model.alerts import AlertRule

SCHEMA_LINE = "# yaml-language-server: $schema=../oncall/checklist/runbook.schema.json"


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def starter_runbook(rule: AlertRule, schema_line: str = SCHEMA_LINE) -> str:
    title = rule.annotations.get("summary") or rule.annotations.get("description") or rule.name
    title = re.sub(r"\{\{.*?\}\}", "…", title)  # the rule's Go templates mean nothing here
    where = f"{rule.file}:{rule.line}" if rule.line else rule.file
    expr = " ".join(rule.expr.split())
    return f"""{schema_line}
# Starter runbook for {rule.name} (rule group {rule.group}, {where}), written by
# `oncall runbook new`. Add the steps that find the cause; `oncall runbook lint` checks it.
alert: {_quoted(rule.name)}
title: {_quoted(" ".join(title.split())[:200])}
steps:
  - id: rule_expression
    title: The rule's expression returns nothing (the alert's condition does not hold)
    probe: prometheus.query
    params:
      query: {_quoted(expr)}
    expect: facts.count == 0
    summary: "{{{{ facts.count }}}} series match the rule's expression"
"""


def starter_test(rule: AlertRule, runbook_name: str) -> str:
    labels = {k: v for k, v in rule.labels.items() if "{{" not in v}
    sample = {"labels": labels, "value": 1.0}
    return f"""# Offline tests of {runbook_name}: `oncall runbook test`.
runbook: ../{runbook_name}
tests:
  - name: the condition holds
    alert: {{state: firing, value: 1.0}}
    facts:
      rule_expression: {{value: 1.0, count: 1, samples: [{json.dumps(sample)}]}}
    expect:
      steps: {{rule_expression: fail}}
      proposals: []
  - name: the condition has cleared
    alert: {{state: firing}}
    facts:
      rule_expression: {{value: null, count: 0, samples: []}}
    expect:
      steps: {{rule_expression: ok}}
"""
