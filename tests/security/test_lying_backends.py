"""Threat: a backend that lies (issue 12, item 9). Prometheus answering 401/403, or 200 with an
SSO proxy's HTML login page, or JSON that is not its API, must never read "all well": exit 3
with the reason (`auth`, `bad payload`) for `oncall alerts` and `oncall check`; only a real
answer (a real Prometheus) gives 0/1. The liars are real HTTP servers on loopback ports."""

from __future__ import annotations

import json

import pytest

from oncall.errors import EXIT_INCOMPLETE
from tests.harness.servers import RunningServer
from tests.security.hostile_cli import Answer, lying_backend, run_inprocess

LOGIN_PAGE = b"<!doctype html><html><body><form action='/oauth2/sign_in'>Sign in</form></html>"

LIARS: dict[str, tuple[Answer, str]] = {
    "401": ((401, "application/json", b'{"error": "unauthorized"}'), "auth"),
    "403": ((403, "text/plain", b"forbidden"), "auth"),
    "html login page": ((200, "text/html", LOGIN_PAGE), "bad payload"),
    "json not the API": ((200, "application/json", b'{"ok": true}'), "bad payload"),
    "garbage": ((200, "application/octet-stream", b"\x00\xff\xfe garbage"), "bad payload"),
}
# Backends that cannot be reached too: nothing else the check needs may answer (no cluster).
QUIET = ("--set", "kubernetes.timeout=1s", "--set", "redis.url=redis://127.0.0.1:1/0")


@pytest.mark.parametrize("liar", list(LIARS))
def test_alerts_exit_3_with_the_reason_when_prometheus_lies(liar: str) -> None:
    answer, reason = LIARS[liar]
    with lying_backend(lambda _path: answer) as url:
        table = run_inprocess("--set", f"prometheus.url={url}", "alerts")
        as_json = run_inprocess("--set", f"prometheus.url={url}", "alerts", "-o", "json")
    assert table.code == EXIT_INCOMPLETE, table.output
    assert "UNKNOWN" in table.stdout and f"  {reason}: " in table.stdout
    assert as_json.code == EXIT_INCOMPLETE
    alerts = json.loads(as_json.stdout)["alerts"]
    assert alerts and all(a["state"] == "unknown" for a in alerts)
    assert all(a["error"].startswith(f"{reason}: ") for a in alerts)


@pytest.mark.parametrize("liar", ["401", "html login page"])
def test_check_exit_3_with_the_reason_when_prometheus_lies(liar: str) -> None:
    answer, reason = LIARS[liar]
    with lying_backend(lambda _path: answer) as url:
        ran = run_inprocess(
            "--set", f"prometheus.url={url}", "--set", f"vllm.urls={url}", *QUIET,
            "check", "LLMHighP99Latency", "-o", "json",
        )  # fmt: skip
    assert ran.code == EXIT_INCOMPLETE, ran.output
    steps = json.loads(ran.stdout)["steps"]
    prom_steps = [s for s in steps if s["probe"] == "prometheus.query"]
    assert prom_steps and all(s["status"] == "unknown" for s in prom_steps)
    assert all(f"prometheus at {url}: {reason}" in s["reason"] for s in prom_steps)


def test_a_real_prometheus_answer_gives_0_or_1(prometheus_srv: RunningServer) -> None:
    """The control: the same command against a real Prometheus is not "incomplete"."""
    ran = run_inprocess("--set", f"prometheus.url={prometheus_srv.url}", "alerts", "-o", "json")
    assert ran.code in (0, 1), ran.output
    assert all(a["error"] is None for a in json.loads(ran.stdout)["alerts"])
