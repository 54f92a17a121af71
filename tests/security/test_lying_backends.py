"""Threat: a backend that lies (issue 12, item 9). Prometheus answering 401/403, or 200 with an
SSO proxy's HTML login page, or JSON that is not its API, must never read "all well": exit 3
with the reason (`auth`, `bad payload`) for `oncall alerts` and `oncall check`; only a real
answer (a real Prometheus) gives 0/1. The same for the vLLM servers (a 401 on `/health` is a
proxy in front, not a dead engine) and the GPU facts read from dcgm-exporter through
Prometheus; Redis's AUTH/NOPERM: tests/security/test_audit_stream_acl.py. The liars are real
HTTP servers on loopback ports."""

from __future__ import annotations

import json
from typing import Any

import pytest

from oncall.errors import EXIT_INCOMPLETE
from tests.harness.faults import Reply, answering_server, gzip_bomb, http_stub
from tests.harness.servers import RunningServer
from tests.security.hostile_cli import run_inprocess

LOGIN_PAGE = b"<!doctype html><html><body><form action='/oauth2/sign_in'>Sign in</form></html>"

LIARS: dict[str, tuple[Reply, str]] = {
    "401": ((401, "application/json", b'{"error": "unauthorized"}'), "auth"),
    "403": ((403, "text/plain", b"forbidden"), "auth"),
    "html login page": ((200, "text/html", LOGIN_PAGE), "bad payload"),
    "json not the API": ((200, "application/json", b'{"ok": true}'), "bad payload"),
    "garbage": ((200, "application/octet-stream", b"\x00\xff\xfe garbage"), "bad payload"),
}
# Backends that cannot be reached too: nothing else the check needs may answer (no cluster).
QUIET = ("--set", "kubernetes.timeout=1s", "--set", "redis.url=redis://127.0.0.1:1/0",
         "--set", "gpu.source=dcgm")  # fmt: skip


@pytest.mark.parametrize("liar", list(LIARS))
def test_alerts_exit_3_with_the_reason_when_prometheus_lies(liar: str) -> None:
    answer, reason = LIARS[liar]
    with answering_server(lambda _path: answer) as url:
        table = run_inprocess("--set", f"prometheus.url={url}", "alerts")
        as_json = run_inprocess("--set", f"prometheus.url={url}", "alerts", "-o", "json")
    assert table.code == EXIT_INCOMPLETE, table.output
    assert "UNKNOWN" in table.stdout and f"  {reason}: " in table.stdout
    assert as_json.code == EXIT_INCOMPLETE
    alerts = json.loads(as_json.stdout)["alerts"]
    assert alerts and all(a["state"] == "unknown" for a in alerts)
    assert all(a["error"].startswith(f"{reason}: ") for a in alerts)


def _check_with_a_liar(
    liar: str, alert: str, prometheus: str | None = None
) -> tuple[list[dict[str, Any]], str, str]:
    """`oncall check ALERT -o json` with the liar as vLLM (and as Prometheus unless one is
    given); the steps, the liar's URL and the reason expected. Exit 3 is asserted here."""
    answer, reason = LIARS[liar]
    with answering_server(lambda _path: answer) as url:
        ran = run_inprocess(
            "--set", f"prometheus.url={prometheus or url}", "--set", f"vllm.urls={url}", *QUIET,
            "check", alert, "-o", "json",
        )  # fmt: skip
    assert ran.code == EXIT_INCOMPLETE, ran.output
    return json.loads(ran.stdout)["steps"], url, reason


def _unknown_saying(steps: list[dict[str, Any]], probe: str, text: str) -> None:
    """Every step of a probe starting with `probe` is there, unknown, its reason with `text`."""
    chosen = [s for s in steps if s["probe"].startswith(probe)]
    assert chosen and all(s["status"] == "unknown" for s in chosen), chosen
    assert all(text in s["reason"] for s in chosen), chosen


@pytest.mark.parametrize("liar", ["401", "html login page"])
def test_check_exit_3_with_the_reason_when_prometheus_lies(liar: str) -> None:
    steps, url, reason = _check_with_a_liar(liar, "LLMHighP99Latency")
    _unknown_saying(steps, "prometheus.query", f"prometheus at {url}: {reason}")
    # The GPU facts from dcgm-exporter's series come through the same lying Prometheus.
    _unknown_saying(steps, "gpu.devices", f"at {url}: {reason}")


@pytest.mark.parametrize("liar", ["401", "403", "html login page"])
def test_check_is_incomplete_not_a_finding_when_vllm_lies(
    liar: str, prometheus_srv: RunningServer
) -> None:
    """A real Prometheus, and an SSO proxy (or a wrong API key) in front of every vLLM server:
    the vLLM steps are unknown with the reason — not "unhealthy" (a failing step, exit 1, as
    `http 401` on /health read before) — and the check is incomplete."""
    steps, url, reason = _check_with_a_liar(liar, "AIServiceUnavailable", prometheus_srv.url)
    _unknown_saying(steps, "vllm.", f"vllm at {url}: {reason}")


def test_a_real_prometheus_answer_gives_0_or_1(prometheus_srv: RunningServer) -> None:
    """The control: the same command against a real Prometheus is not "incomplete"."""
    ran = run_inprocess("--set", f"prometheus.url={prometheus_srv.url}", "alerts", "-o", "json")
    assert ran.code in (0, 1), ran.output
    assert all(a["error"] is None for a in json.loads(ran.stdout)["alerts"])


def test_a_gzip_bomb_is_an_incomplete_answer_not_a_crash(prometheus_srv: RunningServer) -> None:
    """Half a megabyte that inflates to 512 MiB, as Prometheus and as every vLLM server:
    `oncall alerts` and `oncall check` name the bound, the answers are unknown, exit 3 (the
    memory it takes: tests/backends/test_answer_size.py)."""
    bomb = gzip_bomb(512)
    with http_stub(200, bomb, "application/json", {"Content-Encoding": "gzip"}) as url:
        alerts = run_inprocess("--set", f"prometheus.url={url}", "alerts", "-o", "json")
        check = run_inprocess(
            "--set", f"prometheus.url={prometheus_srv.url}", "--set", f"vllm.urls={url}", *QUIET,
            "check", "AIServiceUnavailable", "-o", "json",
        )  # fmt: skip
    assert alerts.code == EXIT_INCOMPLETE, alerts.output
    unknown = json.loads(alerts.stdout)["alerts"]
    assert unknown and all(a["state"] == "unknown" for a in unknown)
    assert all("answer larger than 64 MiB" in a["error"] for a in unknown), unknown
    assert check.code == EXIT_INCOMPLETE, check.output
    steps = json.loads(check.stdout)["steps"]
    _unknown_saying(steps, "vllm.", f"vllm at {url}: bad payload (answer larger than 16 MiB)")
