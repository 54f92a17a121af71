"""`oncall check ALERT --record FILE` against a real Prometheus: the file passes `runbook test`."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.cli_runner import run_oncall
from tests.harness.servers import RunningServer

RULES = """\
groups:
- name: mine
  rules:
  - alert: TwoIsMoreThanOne
    expr: label_replace(vector(2), "pod", "vllm-0", "", "") > 1
    labels: {severity: page}
    annotations: {summary: "{{ $labels.pod }} at {{ $value }}"}
"""


def test_a_recorded_run_replays_offline(prometheus_srv: RunningServer, tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(RULES)
    args = ("--set", "alerts.packs=", "--set", f"alerts.files={tmp_path / 'mine.yaml'}",
            "--set", f"prometheus.url={prometheus_srv.url}", "--set", "alerts.source=local",
            "--set", f"runbooks.dirs={tmp_path / 'rb'}")  # fmt: skip
    made = run_oncall("runbook", "new", "TwoIsMoreThanOne", "--dir", "rb", *args, cwd=tmp_path)
    assert made.code == 0, made.stderr
    record = tmp_path / "rb" / "tests" / "recorded.test.yaml"
    checked = run_oncall("check", "TwoIsMoreThanOne", "--record", str(record), *args, cwd=tmp_path)
    assert checked.code == 1, checked.stderr  # the rule's expression returns a series: fail
    data = yaml.safe_load(record.read_text())
    assert data["runbook"] == "../TwoIsMoreThanOne.yaml"
    (case,) = data["tests"]
    assert case["alert"]["state"] == "firing" and case["alert"]["labels"]["pod"] == "vllm-0"
    assert case["alert"]["annotations"] == {"summary": "vllm-0 at 2"}  # expanded
    assert case["facts"]["rule_expression"]["count"] == 1
    assert case["expect"]["steps"] == {"rule_expression": "fail"}
    replayed = run_oncall("runbook", "test", str(record), cwd=tmp_path)
    assert replayed.code == 0, replayed.stdout + replayed.stderr
    again = run_oncall("check", "TwoIsMoreThanOne", "--record", str(record), *args, cwd=tmp_path)
    assert again.code == 1
    assert len(yaml.safe_load(record.read_text())["tests"]) == 2  # appended
    assert run_oncall("runbook", "test", str(tmp_path / "rb"), cwd=tmp_path).code == 0
