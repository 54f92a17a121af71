"""The committed JSON Schema agrees with the loader, checked with a standard validator.

Every shipped runbook passes `jsonschema` (Draft 2020-12, as the schema says) — so an editor
with the YAML language server underlines nothing in a valid file — and every structurally
broken runbook below, which the lint rejects, fails it too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from oncall.checklist.loader import load_runbook
from oncall.checklist.schema import SCHEMA_PATH

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "runbooks").glob("*.yaml"))
GOOD = """\
alert: Demo
title: Demo alert
vars: {rate_window: 5m}
steps:
  - id: pods
    title: Pods are ready
    probe: kube.pods
    timeout: 8s
    expect: facts.ready == facts.total
"""


def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(data: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in _validator().iter_errors(data)]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_runbook_passes_the_standard_validator(path: Path) -> None:
    assert load_runbook(path).problems == []
    assert _errors(yaml.safe_load(path.read_text())) == []


BROKEN = {
    "unknown top-level field": GOOD + "severity: page\n",
    "unknown step field": GOOD.replace("    timeout: 8s\n", "    timeout: 8s\n    retries: 2\n"),
    "bad step id": GOOD.replace("id: pods", "id: Pods-1"),
    "unknown probe": GOOD.replace("probe: kube.pods", "probe: kube.podz"),
    "bad duration": GOOD.replace("timeout: 8s", "timeout: 8 seconds"),
    "no steps": "alert: Demo\ntitle: Demo alert\nsteps: []\n",
    "no alert": GOOD.replace("alert: Demo\n", ""),
    "bad remediation action": GOOD + "remediations:\n  x:\n    action: reboot\n    title: X\n",
    "concurrency out of range": GOOD + "concurrency: 99\n",
    "evidence side neither above nor below": GOOD.replace(
        "    timeout: 8s\n",
        "    timeout: 8s\n    evidence: [{label: Pods, value: facts.count, bad: under}]\n",
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_runbook_the_lint_rejects_fails_the_validator_too(name: str, tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN[name])
    assert load_runbook(path).problems, "the lint accepts it"
    assert _errors(yaml.safe_load(BROKEN[name])), "the schema accepts it"


def test_the_good_example_passes_both(tmp_path: Path) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert load_runbook(path).problems == []
    assert _errors(yaml.safe_load(GOOD)) == []
