"""A rule whose evaluation fails, from a real prometheus: its state, health and lastError.

Prometheus parses `BrokenJoin` when it loads the file; only evaluating it fails (a
many-to-many `+ on()` join, whatever the data), so its health is "err" with the error text and
it stays inactive. It needs a prometheus of its own: the session's `prometheus_srv` has no
rule files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.cli_runner import run_oncall
from tests.harness.servers import RunningServer
from tests.harness.waiting import wait_until

RULES = """\
groups:
- name: health
  rules:
  - alert: BrokenJoin
    expr: >-
      (label_replace(vector(1), "a", "x", "", "") or label_replace(vector(1), "a", "y", "", ""))
      + on()
      (label_replace(vector(1), "b", "x", "", "") or label_replace(vector(1), "b", "y", "", ""))
    labels: {severity: page}
  - alert: Fine
    expr: vector(1) > 5
    labels: {severity: page}
"""


def _health(url: str) -> dict[str, Any]:
    body = httpx.get(f"{url}/api/v1/rules", params={"type": "alert"}, timeout=5, trust_env=False)
    return {r["name"]: r for g in body.json()["data"]["groups"] for r in g["rules"]}


def test_an_evaluation_error_is_shown_with_prometheus_text_and_the_state_kept(
    start_prometheus: Callable[..., RunningServer], tmp_path: Path
) -> None:
    rule_file = tmp_path / "health.yml"
    rule_file.write_text(RULES)
    prom = start_prometheus(rule_files=[rule_file])
    wait_until(
        lambda: _health(prom.url)["BrokenJoin"]["health"] == "err",
        within=30,
        what="BrokenJoin evaluated",
    )
    config = tmp_path / "oncall.yaml"
    config.write_text(f"prometheus: {{url: '{prom.url}'}}\nalerts: {{packs: []}}\n")
    result = run_oncall("alerts", "-o", "json", "--config", str(config), cwd=tmp_path)
    assert result.code == 0, result.stderr  # a rule's error is not the backend's
    alerts = {a["name"]: a for a in json.loads(result.stdout)["alerts"]}
    broken = alerts["BrokenJoin"]
    # Prometheus' own text (the order of the duplicate series in it may vary between runs).
    assert broken["last_error"].startswith(
        "found duplicate series for the match group {} on the right hand-side of the operation"
    )
    assert "many-to-many matching not allowed" in broken["last_error"]
    assert (broken["state"], broken["health"]) == ("inactive", "err")
    assert broken["error"] == f"evaluation failed: {broken['last_error']}"
    fine = alerts["Fine"]
    assert (fine["state"], fine["health"], fine["last_error"], fine["error"]) == (
        "inactive", "ok", None, None,
    )  # fmt: skip
    table = run_oncall("alerts", "--config", str(config), cwd=tmp_path).stdout
    row = next(line for line in table.splitlines() if line.startswith("BrokenJoin"))
    assert "INACTIVE" in row and "evaluation failed: found duplicate series" in row
