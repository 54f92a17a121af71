"""`oncall check ALERT --chart`: the alert's and its PromQL evidence's charts, as text and in
`-o json`, from a real Prometheus evaluating the rule (docs/on-call.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from oncall.backends.prometheus import PrometheusClient
from oncall.model.alerts import AlertRule
from tests.cli_runner import run_oncall
from tests.harness.servers import RunningServer, rule_file_text
from tests.harness.waiting import eventually

SEVEN = AlertRule(name="Seven", expr="vector(7) > 5", group="g", file="", line=0, for_s=1.0)
RUNBOOK = """
alert: Seven
title: Seven is over five
steps:
  - id: seven
    title: Seven under five
    probe: prometheus.query
    params: {query: "vector(7)"}
    expect: facts.value < 5.0
    evidence:
      - {label: The value, value: facts.value, threshold: 5.0, unit: count}
      - {label: Twice the value, value: facts.value * 2.0}
"""


def setup(tmp_path: Path, start_prometheus: Callable[..., RunningServer]) -> list[str]:
    (tmp_path / "alerts").mkdir()
    (tmp_path / "alerts" / "seven.yaml").write_text(rule_file_text(SEVEN))
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "Seven.yaml").write_text(RUNBOOK)
    server = start_prometheus(rule_files=[tmp_path / "alerts" / "seven.yaml"])
    return [
        "--set", f"prometheus.url={server.url}",
        "--set", f"alerts.dirs={json.dumps([str(tmp_path / 'alerts')])}",
        "--set", 'alerts.packs=["seven"]',
        "--set", f"runbooks.dirs={json.dumps([str(tmp_path / 'runbooks')])}",
        "--set", f"audit.path={tmp_path / 'audit.jsonl'}",
    ]  # fmt: skip


async def firing(url: str) -> bool:
    async with PrometheusClient(url, timeout=2) as prom:
        now = time.time()
        series = await prom.query_range(
            'ALERTS{alertstate="firing"}', start=now - 60, end=now, step=1
        )
    return bool(series)


async def test_chart_as_text_and_json(
    tmp_path: Path, start_prometheus: Callable[..., RunningServer]
) -> None:
    options = setup(tmp_path, start_prometheus)
    url = options[1].split("=", 1)[1]
    await eventually(lambda: firing(url), within=30, what="Seven firing in Prometheus")
    text = run_oncall(*options, "check", "Seven", "--chart", "15m", env={"COLUMNS": "100"})
    assert text.code == 1, text.stderr  # the step fails
    lines = text.stdout.splitlines()
    assert "Seven  ┄ threshold > 5" in lines  # the alert's chart, full at 100 columns
    assert "seven: The value  ┄ threshold > 5  (count)" in lines  # the PromQL evidence
    assert not any(line.startswith("seven: Twice") for line in lines)  # not a series: text only
    assert any("└" in line and "▓" in line for line in lines), text.stdout  # the firing period
    body = json.loads(run_oncall(*options, "check", "Seven", "--chart", "-o", "json").stdout)
    alert, evidence = body["charts"]
    assert alert["title"] == "Seven" and alert["query"] == "vector(7)"
    assert alert["end"] - alert["start"] == 3600  # --chart alone: the last hour
    assert {v for _, v in alert["points"]} == {7.0} and alert["threshold"] == [">", 5.0]
    assert any(state == "firing" for *_, state in alert["periods"])
    assert evidence["query"] == "vector(7)" and evidence["unit"] == "count"


def test_no_color_prints_the_sparkline(
    tmp_path: Path, start_prometheus: Callable[..., RunningServer]
) -> None:
    options = setup(tmp_path, start_prometheus)
    out = run_oncall(*options, "check", "Seven", "--chart", env={"NO_COLOR": "1"}).stdout
    assert "Seven  threshold > 5" in out.splitlines()
    assert "min 7 " in out and " max 7" in out
