"""The configuration reference page is generated from the settings model and kept current."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

from oncall.settings import model as settings_model
from oncall.settings.reference import REFERENCE_PATH, REGENERATE, render_reference

ROOT = Path(__file__).resolve().parent.parent


def test_committed_reference_is_current() -> None:
    committed = (ROOT / REFERENCE_PATH).read_text(encoding="utf-8")
    assert committed == render_reference(), f"{REFERENCE_PATH} is stale: run {REGENERATE}"


def test_every_setting_is_listed_with_its_environment_name() -> None:
    page = render_reference()
    assert '| `redis.timeout`<br>`ONCALL_REDIS__TIMEOUT` | `"2s"` |' in page
    assert "| `read_only`<br>`ONCALL_READ_ONLY` | `false` |" in page
    # A secret is marked, and its default (none) is not a value.
    api_key = "| `vllm.api_key`<br>`ONCALL_VLLM__API_KEY` | — |"
    assert f"{api_key} Sent as Authorization: Bearer. Secret. |" in page


def test_a_changed_description_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the staleness test guards: a field's description edited without regenerating."""
    before = render_reference()
    fields = dict(settings_model.RedisSettings.model_fields)
    timeout = fields["timeout"]
    changed = Field(timeout.default, description="Per-command timeout; edited.")
    monkeypatch.setitem(settings_model.RedisSettings.model_fields, "timeout", changed)
    after = render_reference()
    assert after != before
    assert "Per-command timeout; edited." in after


def test_a_pipe_in_a_description_does_not_break_the_table() -> None:
    page = render_reference()
    for line in page.splitlines():
        if line.startswith("| `"):
            cells = line.replace("\\|", "").split("|")
            assert len(cells) == 5, line
