"""The vendored kube-prometheus rules (fixtures/rules/kube-prometheus) in a real Prometheus, as
the tests that compare oncall with Prometheus load them: each PrometheusRule object's groups
written as a plain rule file (as the operator does), and Prometheus' own view of them read back
from its rules API. Not a conftest: an ordinary module, imported by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import yaml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rules" / "kube-prometheus"


def plain_rule_files(directory: Path) -> list[Path]:
    """Each vendored PrometheusRule's `spec` (its groups) as a rule file in `directory`."""
    files = []
    for source in sorted(FIXTURES.glob("*.yaml")):
        target = directory / source.name
        target.write_text(yaml.safe_dump(yaml.safe_load(source.read_text())["spec"]))
        files.append(target)
    return files


def alerting_groups(url: str) -> list[dict[str, Any]]:
    """The alerting rule groups of the Prometheus at `url`, with each rule's state and alerts."""
    body = httpx.get(f"{url}/api/v1/rules", params={"type": "alert"}, timeout=5).json()
    groups: list[dict[str, Any]] = body["data"]["groups"]
    return groups


def every_rule_evaluated(groups: list[dict[str, Any]]) -> bool:
    """Whether Prometheus has evaluated every rule of `groups` once (before, year 0001)."""
    rules = [r for g in groups for r in g["rules"]]
    return all(not r["lastEvaluation"].startswith("0001") for r in rules)
