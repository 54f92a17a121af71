"""The `alertmanager:` settings section: optional, checked at load, secrets never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oncall.errors import ConfigError
from oncall.redaction import redact
from oncall.settings import load_settings
from tests.cli_runner import run_oncall


def test_absent_means_no_alertmanager(tmp_path: Path) -> None:
    settings = load_settings(cwd=tmp_path, environ={}).settings
    assert settings.alertmanager.url is None


def test_a_bad_url_is_a_located_problem(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text("alertmanager:\n  url: ftp://am:9093\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd=tmp_path, environ={})
    assert "oncall.yaml:2:8: alertmanager.url: URL scheme must be http or https" in str(
        caught.value
    )


def test_config_show_masks_the_token_and_the_url_password(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text(
        "alertmanager:\n  url: https://ops:pa55word@am.example:9093\n"
        "  bearer_token: am-token-123\n  timeout: 2s\n"
    )
    result = run_oncall("config", "show", "-o", "json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    shown = json.loads(result.stdout)["settings"]["alertmanager"]
    assert shown["url"] == "https://ops:********@am.example:9093"
    assert shown["bearer_token"] == "********"
    assert shown["timeout"] == "2s"
    assert "pa55word" not in result.stdout and "am-token-123" not in result.stdout


def test_loading_registers_the_token_for_redaction(tmp_path: Path) -> None:
    environ = {"ONCALL_ALERTMANAGER__BEARER_TOKEN": "am-secret-from-env"}
    load_settings(cwd=tmp_path, environ=environ)
    assert "am-secret-from-env" not in redact("echoed back: am-secret-from-env")
