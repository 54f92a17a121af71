"""`oncall check ALERT --record FILE` against a real Prometheus: the file passes `runbook test`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oncall.checklist.recording import write_record
from oncall.errors import EXIT_USAGE, ConfigError, UsageError
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


BOMB = 'runbook: x.yaml\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
    for i in range(9)
)


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("runbook: x.yaml\ntests: [\n", ":3:1:", "YAML syntax error"),
        (BOMB, ":11:8:", "aliases expand this document past 1,000,000 nodes"),
        ("#" * (8 * 1_048_576 + 1), ":1:1:", "file larger than 8,388,608 bytes"),
        ("- just\n- a list\n", ":1:1:", "mapping"),
    ],
    ids=["syntax", "alias-bomb", "huge", "not-a-mapping"],
)
def test_an_existing_record_file_is_read_bounded(
    tmp_path: Path, text: str, where: str, message: str
) -> None:
    """`--record` onto an existing file reads it with the runbooks' bounded loader: a broken,
    huge or hostile file is a located settings-style error (exit 2), and is left as it was."""
    record = tmp_path / "case.test.yaml"
    record.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        write_record(record, str(tmp_path / "x.yaml"), {"name": "c"})
    assert err.value.exit_code == EXIT_USAGE
    (problem,) = err.value.problems
    assert str(problem).startswith(f"{record}{where}"), str(problem)
    assert message in problem.message
    assert "--record file, not overwritten" in err.value.report()
    assert record.read_text(encoding="utf-8") == text


def test_a_record_file_without_tests_is_not_overwritten(tmp_path: Path) -> None:
    record = tmp_path / "case.test.yaml"
    record.write_text("runbook: x.yaml\n", encoding="utf-8")
    with pytest.raises(UsageError, match="not a runbook test file"):
        write_record(record, str(tmp_path / "x.yaml"), {"name": "c"})
    record.write_text("runbook: x.yaml\ntests: []\n", encoding="utf-8")
    write_record(record, str(tmp_path / "x.yaml"), {"name": "c"})
    assert yaml.safe_load(record.read_text(encoding="utf-8"))["tests"] == [{"name": "c"}]
