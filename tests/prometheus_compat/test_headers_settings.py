"""`prometheus.headers`: checked when the settings load, and their values kept secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oncall.errors import ConfigError
from oncall.redaction import redact
from oncall.settings import load_settings
from tests.cli_runner import run_oncall

TENANT = "tenant-of-the-llm-team"


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        (
            "\n    'X Org': a",
            "oncall.yaml:3:5: prometheus.headers: 'X Org' is not an HTTP header name",
        ),
        (
            ' {X-Scope-OrgID: "a\\r\\nX-Evil: 1"}',
            "oncall.yaml:2:12: prometheus.headers: the value of header X-Scope-OrgID holds a "
            "line break",
        ),
    ],
    ids=["name", "line break"],
)
def test_a_bad_header_is_a_located_problem(tmp_path: Path, headers: str, problem: str) -> None:
    (tmp_path / "oncall.yaml").write_text(f"prometheus:\n  headers:{headers}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd=tmp_path, environ={})
    # One problem, located; a value is never repeated (`X-Evil` is in the value).
    assert [str(p) for p in caught.value.problems] == [problem]


def test_header_values_are_masked_by_config_show_and_redacted_everywhere(tmp_path: Path) -> None:
    config = tmp_path / "oncall.yaml"
    config.write_text(f"prometheus:\n  url: http://127.0.0.1:1/prometheus\n"
                      f"  headers: {{X-Scope-OrgID: {TENANT}}}\n")  # fmt: skip
    shown = run_oncall("config", "show", "-o", "json", "--config", str(config), cwd=tmp_path)
    assert shown.code == 0, shown.stderr
    prometheus = json.loads(shown.stdout)["settings"]["prometheus"]
    assert prometheus["url"] == "http://127.0.0.1:1/prometheus"
    assert set(prometheus["headers"]) == {"X-Scope-OrgID"}
    as_yaml = run_oncall("config", "show", "--config", str(config), cwd=tmp_path)
    assert "X-Scope-OrgID" in as_yaml.stdout
    assert TENANT not in shown.stdout + as_yaml.stdout + shown.stderr + as_yaml.stderr
    # Loading registers the value with the redaction: an error body echoing it is masked.
    load_settings(config=config, cwd=tmp_path, environ={})
    assert TENANT not in redact(f"unknown tenant {TENANT}")
