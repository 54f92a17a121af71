"""Issue 28, acceptance 1: rule liveness against a real Prometheus.

The Prometheus holds vLLM series as a KServe deployment has them (container
`kserve-container`, the counter `vllm:num_preemptions_total`), backfilled sample by sample,
and has two scrape jobs: `vllm` every 15 s and `vllm-slow` every minute (their targets are a
closed loopback port: only their configured intervals matter). Four rules:
(a) a metric that does not exist at this vLLM version, (b) a label matcher that empties an
existing metric, (c) `rate(x[1m])` at a 60 s scrape interval, (d) a healthy rule. Only (a)-(c)
are flagged, each with its reason, by `oncall rules check` (exit 1), in `oncall alerts -o
json`, and by the pure judge the board uses.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from oncall.alerts.liveness import Facts, alternatives, judge, selectors_of
from oncall.alerts.liveness_fetch import fetch_facts
from oncall.backends.prometheus import PrometheusClient
from oncall.model.alerts import Liveness
from tests.cli_runner import run_oncall
from tests.harness.processes import free_port
from tests.harness.servers import RunningServer, prometheus_server
from tests.harness.waiting import wait_until

RULES = """\
groups:
  - name: vllm
    rules:
      - alert: VllmPreempting
        expr: rate(vllm:num_preemptions[5m]) > 0
        labels: {severity: page}
      - alert: VllmKvCacheFull
        expr: max by (pod) (vllm:kv_cache_usage_perc{container="vllm"}) > 0.9
        labels: {severity: page}
      - alert: VllmSlowJobErrors
        expr: rate(vllm:request_failure_total{job="vllm-slow"}[1m]) > 1
        labels: {severity: warning}
      - alert: VllmPreemptingTotal
        expr: rate(vllm:num_preemptions_total[5m]) > 100 or absent(vllm:kv_cache_usage_perc)
        labels: {severity: page}
"""
TEAM_RULES = """\
groups:
  - name: team
    rules:
      - alert: TeamQueueBacklog
        expr: sum(vllm:num_requests_waiting) > 10
        labels: {severity: warning}
"""
HEALTHY = "VllmPreemptingTotal"
REASONS = {
    "VllmPreempting": "no series named vllm:num_preemptions; "
    "found vllm:num_preemptions_total — the counter is named with _total",
    "VllmKvCacheFull": 'vllm:kv_cache_usage_perc{container="vllm"} matches nothing: '
    'container="vllm": values here are {kserve-container, queue-proxy}',
    "VllmSlowJobErrors": "rate(…[1m]) needs two samples; the scrape interval of vllm-slow is 1m",
}


def _samples(end: int) -> str:
    """Ten minutes of KServe-shaped vLLM series, a sample every 15 s up to `end`."""
    lines = [
        "# TYPE vllm:kv_cache_usage_perc gauge",
        "# TYPE vllm:num_preemptions counter",
        "# TYPE vllm:request_failure counter",
    ]
    pod = 'job="vllm",instance="10.0.0.7:8000",pod="llama-0"'
    for step, ts in enumerate(range(end - 600, end + 1, 15)):
        lines.append(f'vllm:kv_cache_usage_perc{{{pod},container="kserve-container"}} 0.5 {ts}')
        lines.append(f'vllm:kv_cache_usage_perc{{{pod},container="queue-proxy"}} 0 {ts}')
        lines.append(f"vllm:num_preemptions_total{{{pod}}} {step} {ts}")
        slow = 'job="vllm-slow",instance="10.0.0.8:8000"'
        lines.append(f"vllm:request_failure_total{{{slow}}} {step} {ts}")
    lines.sort(key=lambda line: (not line.startswith("#"), line.split("{")[0]))
    return "\n".join([*lines, "# EOF", ""])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    closed = f"127.0.0.1:{free_port()}"
    jobs = [
        {"job_name": "vllm", "scrape_interval": "15s", "static_configs": [{"targets": [closed]}]},
        {"job_name": "vllm-slow", "scrape_interval": "1m",
         "static_configs": [{"targets": [closed]}]},
    ]  # fmt: skip
    directory = tmp_path_factory.mktemp("liveness")
    own = directory / "team.rules.yaml"  # a rule only Prometheus has
    own.write_text(TEAM_RULES, encoding="utf-8")
    with prometheus_server(
        directory / "prom", scrape_configs=jobs, rule_files=[own],
        openmetrics=_samples(int(time.time()) - 5),
    ) as server:  # fmt: skip

        def discovered() -> bool:
            body = httpx.get(f"{server.url}/api/v1/targets", timeout=5).json()
            jobs = {t["labels"]["job"] for t in body["data"]["activeTargets"]}
            return jobs == {"vllm", "vllm-slow"}

        wait_until(discovered, within=30, what="both scrape jobs discovered")
        yield server


@pytest.fixture
def rule_file(tmp_path: Path) -> Path:
    path = tmp_path / "vllm.rules.yaml"
    path.write_text(RULES, encoding="utf-8")
    return path


def _settings(tmp_path: Path, url: str, rules: Path) -> Path:
    config = tmp_path / "oncall.yaml"
    config.write_text(
        f"prometheus: {{url: '{url}', timeout: 5s}}\n"
        f"alerts: {{packs: [], files: ['{rules}'], source: local}}\n"
        f"audit: {{path: '{tmp_path / 'audit.jsonl'}'}}\n",
        encoding="utf-8",
    )
    return config


async def test_facts_and_verdicts_from_a_real_prometheus(prometheus: RunningServer) -> None:
    exprs = [line.split("expr: ", 1)[1] for line in RULES.splitlines() if "expr: " in line]
    async with PrometheusClient(prometheus.url, timeout=5) as prom:
        facts = await fetch_facts(prom, exprs)
        requests = prom.requests
    assert facts.error is None
    assert facts.intervals == {"vllm": 15.0, "vllm-slow": 60.0}
    # targets, one count query for the 5 selectors, one name query, one label-values query
    assert requests == 4
    verdicts = {expr: judge(expr, facts) for expr in exprs}
    states = [verdicts[expr].state for expr in exprs]
    assert states == ["silent", "silent", "silent", "live"]
    assert [verdicts[e].reasons for e in exprs[:3]] == [(r,) for r in REASONS.values()]


def test_rules_check_flags_the_three_and_exits_1(
    prometheus: RunningServer, rule_file: Path, tmp_path: Path
) -> None:
    config = _settings(tmp_path, prometheus.url, rule_file)
    result = run_oncall(
        "rules", "check", "--config", str(config), "--prometheus", prometheus.url,
        str(rule_file), cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        f"{rule_file}:4:9: VllmPreempting (page): silent: {REASONS['VllmPreempting']}",
        f"{rule_file}:7:9: VllmKvCacheFull (page): silent: {REASONS['VllmKvCacheFull']}",
        f"{rule_file}:10:9: warning: VllmSlowJobErrors (warning): silent: "
        f"{REASONS['VllmSlowJobErrors']}",
    ]
    # A rule only Prometheus has is located by its group and Prometheus' file.
    assert lines[3] == (
        f'group "team" (file {prometheus.directory.parent / "team.rules.yaml"}): warning: '
        "TeamQueueBacklog (warning): silent: no series named vllm:num_requests_waiting"
    )
    assert HEALTHY not in result.stdout
    assert lines[4].startswith("5 alerting rules checked against http://127.0.0.1:")
    assert lines[4].endswith(": 4 cannot fire (2 paging), 0 not known, 0 file problems")


def test_rules_check_without_a_paging_rule_flagged_exits_0(
    prometheus: RunningServer, tmp_path: Path
) -> None:
    only = tmp_path / "ok.yaml"
    lines = RULES.splitlines()
    only.write_text("\n".join(lines[:3] + lines[9:]) + "\n", encoding="utf-8")
    result = run_oncall("rules", "check", "--prometheus", prometheus.url, str(only), cwd=tmp_path)
    assert result.code == 0, result.stdout + result.stderr
    assert "warning: VllmSlowJobErrors" in result.stdout


def test_rules_check_with_prometheus_down_exits_3(rule_file: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = run_oncall("rules", "check", "--prometheus", url, str(rule_file), cwd=tmp_path)
    assert result.code == 3, result.stdout + result.stderr
    assert "refused" in result.stdout


def test_alerts_json_has_liveness(
    prometheus: RunningServer, rule_file: Path, tmp_path: Path
) -> None:
    config = _settings(tmp_path, prometheus.url, rule_file)
    result = run_oncall("alerts", "-o", "json", "--config", str(config), cwd=tmp_path)
    assert result.code == 0, result.stdout + result.stderr
    alerts = {a["name"]: a for a in json.loads(result.stdout)["alerts"]}
    assert {n: a["state"] for n, a in alerts.items()} == dict.fromkeys(alerts, "inactive")
    assert alerts[HEALTHY]["liveness"] == {"state": "live", "reasons": []}
    for name, reason in REASONS.items():
        assert alerts[name]["liveness"] == {"state": "silent", "reasons": [reason]}
    table = run_oncall("alerts", "--config", str(config), cwd=tmp_path)
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[2:] if line}
    assert " SILENT " in rows["VllmPreempting"] and "no series named" in rows["VllmPreempting"]
    assert " INACTIVE " in rows[HEALTHY]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("rate(vllm:x[5m]) > 0 and on() up", ["vllm:x", "up"]),
        ("absent(a) or b{c=~'d.*'} unless e offset 5m", ["a", "b", "e"]),
        ("max_over_time(rate(f_total[1m])[30m:1m]) > 1", ["f_total"]),
    ],
)
def test_selectors_of_expressions(expr: str, names: list[str]) -> None:
    assert [s.name for s in selectors_of(expr)] == names


def test_verdict_follows_the_expression() -> None:
    """`or` is silent only when both sides are; absent() reads absence on purpose; `unless`
    and `and` need their left (and `and` its right) side; facts not asked: unknown."""
    facts = Facts(matched={"a{}": frozenset(), "b{}": frozenset({"j"})}, names=frozenset({"b"}))
    assert judge("a or b", facts).state == "live"
    assert judge("a and b", facts).state == "silent"
    assert judge("b unless a", facts).state == "live"
    assert judge("a unless b", facts).state == "silent"
    assert judge("absent(a)", facts).state == "live"
    assert judge("sum(a) > 1", facts).reasons == ("no series named a",)
    assert judge("vector(1) > 0", facts).state == "live"
    assert judge("c > 1", facts).state == "unknown"
    assert judge("a > 1", Facts(error="liveness not known: refused")).state == "unknown"


def test_alternatives_are_the_checklists_known_renames() -> None:
    assert alternatives("vllm:num_preemptions") == [
        "ray_vllm:num_preemptions", "vllm:num_preemptions_total",
    ]  # fmt: skip
    assert alternatives("ray_vllm:x_total") == ["vllm:x_total", "ray_vllm:x"]
    ray = Facts(matched={"vllm:kv{}": frozenset()}, names=frozenset({"ray_vllm:kv"}))
    assert judge("vllm:kv > 0.9", ray).reasons == (
        "no series named vllm:kv; found ray_vllm:kv — a Ray Serve deployment?",
    )


def test_rules_check_prints_located_file_problems_and_exits_1(
    prometheus: RunningServer, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: rate(x[5m]\n"
        "        annotations: {summary: '{{ $label.pod }}'}\n",
        encoding="utf-8",
    )
    result = run_oncall("rules", "check", "--prometheus", prometheus.url, str(broken), cwd=tmp_path)
    assert result.code == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        f"{broken}:5:15: groups.0.rules.0.expr: could not parse expression: "
        "unclosed left parenthesis",
        f"{broken}:6:32: groups.0.rules.0.annotations.summary: "
        'undefined variable "$label" (at offset 2 of the template)',
    ]
    assert lines[-1].endswith(", 2 file problems")


async def test_a_selector_prometheus_refuses_is_unknown_and_spares_the_others(
    prometheus: RunningServer,
) -> None:
    """`x++` is a regex the Rust parser reads and Prometheus' Go regexp refuses: its batch is
    asked again in halves (bounded), so the other rules are still judged and only that one
    is unknown, saying why."""
    refused = 'up{job=~"x++"} > 0'
    exprs = [refused, "rate(vllm:num_preemptions[5m]) > 0", "vllm:num_preemptions_total > 0"]
    async with PrometheusClient(prometheus.url, timeout=5) as prom:
        facts = await fetch_facts(prom, exprs)
        requests = prom.requests
    assert facts.refused == frozenset({'up{job=~"x++"}'})
    assert judge(refused, facts) == Liveness("unknown", ('Prometheus refused up{job=~"x++"}',))
    assert judge(exprs[1], facts).state == "silent"
    assert judge(exprs[2], facts).state == "live"
    # targets, the refused batch of 3, its halves (the refused 1, the good 2), names
    assert requests == 5
