"""Threat: secrets on screen, in JSON and in logs (issue 12, item 4). Passwords in
`prometheus.url` / `vllm.urls`, configured tokens, and credentials a backend echoes in its
error body must not leave the process: `oncall alerts` (header and JSON), `oncall check`
(reasons, summaries, curl equivalents), `config show` (also for URLs urlsplit refuses), logs."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from oncall.redaction import MASK, RedactingStream, forget_secrets, redact, register_secret
from tests.harness.faults import answering_server
from tests.security.hostile_cli import run_inprocess

PROM_PW = "pr0m-Passw0rd"
VLLM_PW = "vllm-S3cret"
ECHOED = "eyJhbGciOiJIUzI1NiJ9.echoed-by-the-backend.sig"
BASIC = "YWxpY2U6d29uZGVybGFuZA=="  # alice:wonderland
ECHO_BODY = json.dumps(
    {
        "error": "unauthorized",
        "request_headers": f"Authorization: Bearer {ECHOED}",
        "upstream": f"Authorization: Basic {BASIC}",
        "query": "/api/v1/query?token=tok-123456&x=1",
    }
).encode()
SECRETS = (PROM_PW, VLLM_PW, ECHOED, BASIC, "tok-123456", "wonderland")


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def _clean(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"leaked {leaked} in:\n{text}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://bob:hunter2@h:9090/x", f"http://bob:{MASK}@h:9090/x"),
        # urlsplit refuses these two; the pattern does not care.
        ("see http://bob:hunter2@h:99999/x", f"see http://bob:{MASK}@h:99999/x"),
        ("http://bob:hunter2@[::1/x", f"http://bob:{MASK}@[::1/x"),
        ("redis://:p@ss@h:6379/0", f"redis://:{MASK}@h:6379/0"),
        ("https://ghp_tokenasuser@github.com", f"https://{MASK}@github.com"),
        ("Authorization: Bearer abc.def-123", f"Authorization: Bearer {MASK}"),
        (f"got Basic {BASIC} back", f"got Basic {MASK} back"),
        ("GET /q?token=t0k&access_token=a1", f"GET /q?token={MASK}&access_token={MASK}"),
        ('{"api_key": "k-1"}', f'{{"api_key": "{MASK}"}}'),
        ('"{\\"password\\": \\"pw\\"}"', f'"{{\\"password\\": \\"{MASK}\\"}}"'),
        # English stays readable.
        ("Basic authentication failed", "Basic authentication failed"),
        ("max_tokens=5 generation_tokens=7", "max_tokens=5 generation_tokens=7"),
    ],
)
def test_redact_by_pattern(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_redaction_keeps_json_valid() -> None:
    body = json.dumps({"e": f'Authorization: Bearer {ECHOED} "quoted"', "u": "http://a:b@h"})
    assert json.loads(redact(body)) == {"e": f'Authorization: Bearer {MASK} "quoted"',
                                        "u": f"http://a:{MASK}@h"}  # fmt: skip


def test_registered_secrets_are_masked_anywhere() -> None:
    register_secret("plain-token-value")
    assert redact("x plain-token-value y") == f"x {MASK} y"


def test_logs_through_the_redacting_stream_are_clean() -> None:
    sink = io.StringIO()
    handler = logging.StreamHandler(RedactingStream(sink))
    log = logging.getLogger("tests.security.redaction")
    log.addHandler(handler)
    try:
        log.warning("connecting to %s with %s", f"http://u:{PROM_PW}@h", f"Bearer {ECHOED}")
        handler.flush()
    finally:
        log.removeHandler(handler)
    assert "connecting to" in sink.getvalue()
    _clean(sink.getvalue())


def _urls(url: str) -> tuple[str, str]:
    host = url.removeprefix("http://")
    return f"http://bob:{PROM_PW}@{host}", f"http://vl:{VLLM_PW}@{host}"


def test_alerts_header_json_and_echoed_credentials_are_redacted() -> None:
    with answering_server(lambda _p: (401, "application/json", ECHO_BODY)) as url:
        prom, _ = _urls(url)
        table = run_inprocess("--set", f"prometheus.url={prom}", "alerts")
        as_json = run_inprocess("--set", f"prometheus.url={prom}", "alerts", "-o", "json")
    assert f"prometheus http://bob:{MASK}@" in table.stdout
    assert json.loads(as_json.stdout)["prometheus"].startswith(f"http://bob:{MASK}@")
    for ran in (table, as_json):
        _clean(ran.output)


def test_check_reasons_summaries_and_curl_equivalents_are_redacted() -> None:
    with answering_server(lambda _p: (401, "application/json", ECHO_BODY)) as url:
        prom, vllm = _urls(url)
        args = ("--set", f"prometheus.url={prom}", "--set", f"vllm.urls={vllm}",
                "--set", "kubernetes.timeout=1s")  # fmt: skip
        table = run_inprocess(*args, "check", "LLMHighP99Latency")
        as_json = run_inprocess(*args, "check", "LLMHighP99Latency", "-o", "json")
    steps = json.loads(as_json.stdout)["steps"]
    assert any(MASK in (s.get("equivalent") or "") for s in steps)  # the curl lines are there
    assert any(MASK in (s.get("reason") or "") for s in steps)
    for ran in (table, as_json):
        _clean(ran.output)


def test_configured_token_from_the_environment_is_masked_in_errors() -> None:
    """A token given by environment is registered and masked even where a backend echoes it
    in a form no pattern knows."""
    body = json.dumps({"error": "bad key", "you_sent": "tok-123456"}).encode()
    with answering_server(lambda _p: (403, "application/json", body)) as url:
        ran = run_inprocess(
            "--set", f"prometheus.url={url}", "alerts",
            env={"ONCALL_PROMETHEUS__BEARER_TOKEN": "tok-123456"},
        )  # fmt: skip
    assert ran.code == 3 and "auth" in ran.stdout
    _clean(ran.output)


@pytest.mark.parametrize(
    "url",
    [
        f"http://bob:{PROM_PW}@127.0.0.1:99999",  # bad port
        f"http://bob:{PROM_PW}@[::1",  # bad IPv6
        f"ftp://bob:{PROM_PW}@127.0.0.1",  # wrong scheme
    ],
)
@pytest.mark.parametrize(
    "command", [["config", "show"], ["alerts"], ["check", "LLMHighP99Latency"]]
)
def test_a_url_urlsplit_refuses_is_a_located_error_without_its_password(
    url: str, command: list[str]
) -> None:
    ran = run_inprocess("--set", f"prometheus.url={url}", *command)
    assert ran.code == 2, ran.output
    assert "flag --set prometheus.url" in ran.stderr and "Traceback" not in ran.output
    _clean(ran.output)


def test_config_show_masks_url_passwords_and_secrets() -> None:
    ran = run_inprocess(
        "--set", f"prometheus.url=http://bob:{PROM_PW}@127.0.0.1:9090",
        "--set", f"vllm.urls=http://vl:{VLLM_PW}@127.0.0.1:8000", "config", "show", "-o", "json",
        env={"ONCALL_VLLM__API_KEY": ECHOED},
    )  # fmt: skip
    assert ran.code == 0, ran.output
    settings = json.loads(ran.stdout)["settings"]
    assert settings["prometheus"]["url"] == f"http://bob:{MASK}@127.0.0.1:9090"
    assert settings["vllm"]["api_key"] == MASK
    _clean(ran.output)


def test_the_log_tail_probe_uses_the_one_redaction() -> None:
    """kube.logs redacts with this module (eager form): configured secrets too."""
    from oncall.probes.kube_log_facts import redact_line

    register_secret(PROM_PW)
    line = f"retrying with password {PROM_PW} at https://bob:x@h --hf-token hf_x Basic {BASIC}"
    redacted = redact_line(line)
    assert redacted == redact(redacted)  # stable: nothing left for a second pass
    assert "bob" not in redacted and "hf_x" not in redacted
    _clean(redacted)
