"""`oncall alerts` as a user runs it: table and JSON, exit codes, bad rule files."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli_runner import run_oncall
from tests.harness.faults import refused_port
from tests.harness.servers import RunningServer
from tests.harness.terminal import PYTHON_M_WITH_CTRL_C

PACK = """\
groups:
- name: test-pack
  rules:
  - alert: AlwaysOn
    expr: vector(2) > 1
    labels: {severity: page}
    annotations: {summary: "always", runbook: runbooks/AlwaysOn.yaml}
  - alert: NeverOn
    expr: vector(0) > 1
    labels: {severity: chat}
"""


def _args(tmp_path: Path, url: str, pack: str = "test") -> list[str]:
    return ["--set", f"prometheus.url={url}", "--set", f"alerts.dirs={tmp_path}",
            "--set", f"alerts.packs={pack}", "--set", "prometheus.timeout=1s"]  # fmt: skip


def test_table_and_exit_1_when_an_alert_fires(
    tmp_path: Path, prometheus_srv: RunningServer
) -> None:
    (tmp_path / "test.yaml").write_text(PACK)
    result = run_oncall("alerts", *_args(tmp_path, prometheus_srv.url), cwd=tmp_path)
    assert result.code == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["ALERT", "SEVERITY", "STATE", "VALUE", "WHEN", "SOURCE", "NOTE"]
    always = next(line for line in lines if line.startswith("AlwaysOn"))
    assert always.split()[:5] == ["AlwaysOn", "page", "FIRING", "2", "firing"]
    never = next(line for line in lines if line.startswith("NeverOn"))
    assert never.split() == ["NeverOn", "chat", "INACTIVE", "local"]


def test_json_shape(tmp_path: Path, prometheus_srv: RunningServer) -> None:
    (tmp_path / "test.yaml").write_text(PACK)
    result = run_oncall("alerts", "-o", "json", *_args(tmp_path, prometheus_srv.url), cwd=tmp_path)
    body = json.loads(result.stdout)
    assert body["prometheus"] == prometheus_srv.url
    alerts = {a["name"]: a for a in body["alerts"]}
    assert alerts["AlwaysOn"]["state"] == "firing"
    assert alerts["AlwaysOn"]["source"] == "local"
    assert alerts["AlwaysOn"]["value"] == 2
    assert alerts["AlwaysOn"]["runbook"] == "runbooks/AlwaysOn.yaml"
    assert alerts["AlwaysOn"]["file"].endswith("test.yaml:4")
    assert alerts["AlwaysOn"]["instances"][0]["state"] == "firing"
    assert alerts["NeverOn"]["state"] == "inactive"
    assert alerts["NeverOn"]["instances"] == []


def test_exit_3_and_unknown_when_prometheus_is_unreachable(tmp_path: Path) -> None:
    (tmp_path / "test.yaml").write_text(PACK)
    url = f"http://127.0.0.1:{refused_port()}"
    result = run_oncall("alerts", "-o", "json", *_args(tmp_path, url), cwd=tmp_path)
    assert result.code == 3
    body = json.loads(result.stdout)
    assert {a["state"] for a in body["alerts"]} == {"unknown"}
    assert all(a["error"].startswith("refused") for a in body["alerts"])


def test_broken_rule_file_is_exit_2_with_positions(tmp_path: Path) -> None:
    (tmp_path / "test.yaml").write_text(PACK.replace("    expr: vector(0) > 1\n", "    exp: 1\n"))
    result = run_oncall("alerts", *_args(tmp_path, "http://127.0.0.1:1"), cwd=tmp_path)
    assert result.code == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("oncall: invalid rule files (2 problems):")
    assert "test.yaml:8:5: groups.0.rules.1.expr: missing field 'expr'" in result.stderr
    assert 'test.yaml:9:5: groups.0.rules.1.exp: unknown field "exp"' in result.stderr


def test_unknown_pack_is_a_settings_error(tmp_path: Path) -> None:
    result = run_oncall("alerts", *_args(tmp_path, "http://127.0.0.1:1", pack="nope"), cwd=tmp_path)
    assert result.code == 2
    assert "alerts.packs: no pack 'nope'" in result.stderr


def test_the_default_packs_load(tmp_path: Path, prometheus_srv: RunningServer) -> None:
    """The checkout's ai-service pack, against a Prometheus that scrapes nothing: all inactive."""
    result = run_oncall(
        "alerts", "-o", "json", "--set", f"prometheus.url={prometheus_srv.url}", cwd=tmp_path
    )
    assert result.code == 0, result.stderr
    names = [a["name"] for a in json.loads(result.stdout)["alerts"]]
    assert names == ["LLMHighP99Latency", "VectorSearchP999High", "LLMOutOfMemory",
                     "AIServiceUnavailable", "PromptRejectionRateHigh"]  # fmt: skip


def test_watch_refreshes_until_interrupted(tmp_path: Path, prometheus_srv: RunningServer) -> None:
    """--watch prints a fresh table every alerts.refresh; SIGINT ends it with 130."""
    (tmp_path / "test.yaml").write_text(PACK)
    # A shell runs background jobs with SIGINT ignored, and children inherit that (make test
    # started with `&`): give the child Python's own Ctrl-C handler, as a terminal would.
    argv = [sys.executable, "-c", PYTHON_M_WITH_CTRL_C, "oncall", "alerts", "--watch",
            *_args(tmp_path, prometheus_srv.url), "--set", "alerts.refresh=300ms"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCALL_")}
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    headers = 0
    try:
        assert proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 20
        while headers < 3 and time.monotonic() < deadline:
            if selector.select(timeout=1):
                line = proc.stdout.readline()
                headers += line.startswith("ALERT ")
        proc.send_signal(signal.SIGINT)
        # Keep draining stdout: a child blocked writing to a full pipe cannot act on SIGINT.
        proc.communicate(timeout=30)
        assert proc.returncode == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert headers == 3


def test_the_vllm_pack_is_selected_with_alerts_packs(
    tmp_path: Path, prometheus_srv: RunningServer
) -> None:
    """`alerts.packs` picks packs by name: the gateway-free vllm pack alone, or with another."""
    base = ["alerts", "-o", "json", "--set", f"prometheus.url={prometheus_srv.url}"]
    alone = run_oncall(*base, "--set", "alerts.packs=vllm", cwd=tmp_path)
    assert alone.code == 0, alone.stderr
    alerts = json.loads(alone.stdout)["alerts"]
    assert [a["name"] for a in alerts] == [
        "VllmInterTokenLatencyP99High", "VllmTTFTP99High", "VllmQueueTimeP99High",
        "VllmKVCacheSaturated", "VllmEngineHung", "VllmEngineRestarted", "VllmRequestErrorsHigh",
    ]  # fmt: skip
    assert {a["state"] for a in alerts} == {"inactive"}
    both = run_oncall(*base, "--set", 'alerts.packs=["ai-service", "vllm"]', cwd=tmp_path)
    assert both.code == 0, both.stderr
    assert len(json.loads(both.stdout)["alerts"]) == 12


def test_values_show_the_unit_their_rule_compares_in(
    tmp_path: Path, prometheus_srv: RunningServer
) -> None:
    (tmp_path / "units.yaml").write_text(
        "groups:\n- name: units\n  rules:\n"
        "  - alert: Ratio\n    expr: vector(3) / vector(10) > 0.01\n    labels: {severity: page}\n"
        "  - alert: Slow\n    expr: vector(9.9) > 1.2\n    labels: {severity: page}\n"
        "    annotations: {unit: s}\n"
    )
    args = _args(tmp_path, prometheus_srv.url, pack="units")
    table = run_oncall("alerts", *args, cwd=tmp_path)
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[2:] if line}
    assert set(rows) == {"Ratio", "Slow"}, table.stdout + table.stderr
    assert rows["Ratio"][3] == "30%" and rows["Slow"][3] == "9.9s"
    body = json.loads(run_oncall("alerts", "-o", "json", *args, cwd=tmp_path).stdout)
    assert {a["name"]: (a["value"], a["unit"]) for a in body["alerts"]} == {
        "Ratio": (0.3, "%"),
        "Slow": (9.9, "s"),
    }
