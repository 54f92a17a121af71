"""Threat: small lies in what oncall reports (issue 12, item 13) — each makes an operator look in
the wrong place. A step that timed out must name the backend it was waiting on; `--read-only`
alone must be reported as coming from the flag, not from the settings. (Also item 13,
elsewhere: control characters in YAML located, tests/security/test_yaml_bombs.py; non-ASCII
digits, test_hostile_values.py; Ctrl-C during verification audited, test_type_ahead.py.)
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from oncall.errors import EXIT_FOUND, EXIT_INCOMPLETE
from tests.harness.faults import Reply, answering_server
from tests.harness.servers import RunningServer
from tests.security.hostile_cli import run_inprocess


def test_a_timed_out_step_names_its_backend(prometheus_srv: RunningServer) -> None:
    """Every vLLM server accepts the connection and never answers; vLLM's own timeout is
    longer than the step's, so the step's timeout is what ends the wait."""
    release = threading.Event()

    def hang(_path: str) -> Reply:
        release.wait(timeout=30)  # bounded: the test sets it once oncall has given up
        return 200, "text/plain", b""

    with answering_server(hang) as url:
        try:
            ran = run_inprocess(
                "--set", f"prometheus.url={prometheus_srv.url}", "--set", f"vllm.urls={url}",
                "--set", "vllm.timeout=60s", "--set", "kubernetes.timeout=1s",
                "--set", "redis.url=redis://127.0.0.1:1/0",
                "check", "AIServiceUnavailable", "-o", "json",
            )  # fmt: skip
        finally:
            release.set()
    assert ran.code == EXIT_INCOMPLETE, ran.output
    [step] = [s for s in json.loads(ran.stdout)["steps"] if s["probe"] == "vllm.health"]
    assert step["status"] == "unknown"
    assert step["reason"].startswith("vllm: no answer within "), step


LEVEL = ["set-degradation-level", "1"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--read-only", "remediate", *LEVEL], "read-only mode (--read-only)"),
        (["remediate", *LEVEL, "--read-only"], "read-only mode (--read-only)"),
        (["--set", "read_only=true", "remediate", *LEVEL], "read-only mode (settings read_only"),
    ],
    ids=["flag before", "flag after", "the setting"],
)
def test_read_only_is_reported_from_where_it_came(
    tmp_path: Path, redis_srv: RunningServer, argv: list[str], said: str
) -> None:
    """The flag given alone was reported as "settings read_only: true and --read-only"."""
    env = {
        "ONCALL_REDIS__URL": redis_srv.url,
        "ONCALL_AUDIT__PATH": str(tmp_path / "audit.jsonl"),
        "ONCALL_KUBERNETES__KUBECONFIG": str(tmp_path / "no-kubeconfig"),
    }
    ran = run_inprocess(*argv, env=env)
    assert ran.code == EXIT_FOUND, ran.output
    assert f"REFUSED read-only: {said}" in ran.stdout, ran.stdout
    assert "and --read-only" not in ran.stdout
    record = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert record["transition"] == "refused" and said in json.dumps(record)
