"""`oncall runbook new ALERT`: a starter runbook and test that lint, test and validate clean."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from oncall.checklist.schema import SCHEMA_PATH
from tests.cli_runner import run_oncall

RULES = """\
groups:
- name: mine
  rules:
  - alert: QueueDeep
    expr: |
      sum by (pod) (vllm:num_requests_waiting) > 50
    labels: {severity: page, team: inference}
    annotations: {summary: "{{ $labels.pod }} has a deep queue"}
"""


def test_runbook_new_writes_a_runbook_and_a_test_that_pass(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(RULES)
    args = ("--set", "alerts.packs=", "--set", f"alerts.files={tmp_path / 'mine.yaml'}")
    made = run_oncall("runbook", "new", "QueueDeep", "--dir", "rb", *args, cwd=tmp_path)
    assert made.code == 0, made.stderr
    runbook = tmp_path / "rb" / "QueueDeep.yaml"
    text = runbook.read_text()
    assert text.splitlines()[0].startswith("# yaml-language-server: $schema=")
    schema_ref = text.splitlines()[0].split("=", 1)[1]
    assert (runbook.parent / schema_ref).resolve() == SCHEMA_PATH.resolve()
    data = yaml.safe_load(text)
    assert data["alert"] == "QueueDeep" and data["title"] == "… has a deep queue"
    assert data["steps"][0]["params"]["query"] == "sum by (pod) (vllm:num_requests_waiting) > 50"
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    assert list(validator.iter_errors(data)) == []
    assert run_oncall("runbook", "lint", "rb", cwd=tmp_path).code == 0
    tested = run_oncall("runbook", "test", "rb", cwd=tmp_path)
    assert tested.code == 0 and "2 passed" in tested.stdout + tested.stderr
    again = run_oncall("runbook", "new", "QueueDeep", "--dir", "rb", *args, cwd=tmp_path)
    assert again.code == 2 and "not overwritten" in again.stderr
    missing = run_oncall("runbook", "new", "Nope", "--dir", "rb", *args, cwd=tmp_path)
    assert missing.code == 2 and "no alerting rule 'Nope'" in missing.stderr
