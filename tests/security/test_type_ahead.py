"""Threat: an answer typed (or piped through `script`) before the preview confirms it (issue 12,
item 7). The confirmation word is in the terminal's input buffer before oncall has printed
anything; pending input is flushed once the preview is on screen, so it does not count: the
person's next input (here: end of input) declines, and nothing changes.

On a real pseudo-terminal (tests/harness/terminal.py's way), against the drill's Kubernetes
API (Leases) and a real redis-server (the degradation key and the guards).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import redis
import yaml

from tests.drill.kube.conftest import NS, Cluster
from tests.harness.servers import RunningServer
from tests.harness.terminal import Answer, run_on_terminal

#: What the confirmation asks to type for the degradation level (the Redis key's name).
WORD = "ai-gateway:degradation-level"


def _typed_ahead(
    args: list[str],
    early: bytes,
    timeout: float = 60.0,
    *,
    answer: Answer = b"\x04",
    interrupt_at: str | None = None,
) -> tuple[int, str]:
    """Run oncall on a pty with `early` already typed; at the prompt, type `answer` (by
    default: end the input, Ctrl-D). With `interrupt_at`, once that text is on the terminal
    the process gets SIGINT, as Ctrl-C sends it to the foreground process."""
    run = run_on_terminal(
        args, [("to confirm", answer)], timeout=timeout, typed_ahead=early,
        interrupt_at=interrupt_at,
    )  # fmt: skip
    return run.code, run.output


def _config(
    tmp_path: Path, drill: Cluster, redis_url: str, **more: dict[str, str]
) -> tuple[Path, Path]:
    audit = tmp_path / "audit.jsonl"
    config = tmp_path / "oncall.yaml"
    config.write_text(yaml.safe_dump({
        "kubernetes": {"kubeconfig": str(drill.kubeconfig), "namespace": NS},
        "redis": {"url": redis_url},
        "audit": {"path": str(audit), "kube_events": False},
        **more,
    }))  # fmt: skip
    return config, audit


def test_an_answer_typed_before_the_preview_does_not_confirm(
    drill: Cluster, redis_url: str, tmp_path: Path
) -> None:
    config, audit = _config(tmp_path, drill, redis_url)
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        before = {k: client.get(k) for k in client.keys("*")}
    code, output = _typed_ahead(
        ["--config", str(config), "remediate", "set-degradation-level", "2"], f"{WORD}\n".encode()
    )
    assert code == 1, output
    assert f"Type the target's name ({WORD}) to confirm" in output, output  # the word typed
    assert "declined" in output, output
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        after = {k: client.get(k) for k in client.keys("*") if client.type(k) == "string"}
    assert {k: v for k, v in after.items() if k in before} == {
        k: v for k, v in before.items() if k in after
    }
    assert "2" not in [v for k, v in after.items() if "degrad" in k]
    transitions = [json.loads(line)["transition"] for line in audit.read_text().splitlines()]
    assert transitions == ["proposed", "declined"]


def test_a_closed_stdin_is_refused_and_audited_not_a_traceback(
    drill: Cluster, redis_url: str, tmp_path: Path
) -> None:
    config, audit = _config(tmp_path, drill, redis_url)
    argv = [sys.executable, "-m", "oncall", "--config", str(config),
            "remediate", "set-degradation-level", "2"]  # fmt: skip
    # `<&-`: file descriptor 0 closed, as a cron job or a broken wrapper may leave it.
    result = subprocess.run(
        ["sh", "-c", 'exec "$@" <&-', "sh", *argv], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "refused (terminal)" in result.stdout
    transitions = [json.loads(line)["transition"] for line in audit.read_text().splitlines()]
    assert transitions == ["proposed", "refused"]


def test_ctrl_c_during_verification_leaves_a_record_and_no_traceback(
    drill: Cluster, redis_url: str, tmp_path: Path, prometheus_srv: RunningServer
) -> None:
    """Issue 12, item 13: Ctrl-C while oncall verifies a change left nothing in the audit after
    `succeeded`. The level is set (confirmed on the terminal, after the preview); verification
    waits for the gateway's gauge, which this (real, empty) Prometheus never has, and the
    person presses Ctrl-C:
    the log says the change was made and its verification interrupted; the command exits 130."""
    config, audit = _config(tmp_path, drill, redis_url, prometheus={"url": prometheus_srv.url})
    code, output = _typed_ahead(
        ["--config", str(config), "remediate", "set-degradation-level", "2"], b"",
        answer=WORD, interrupt_at="waiting for the gateway",
    )  # fmt: skip
    assert code == 130, output
    assert "oncall: interrupted" in output and "Traceback" not in output, output
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        assert client.get(WORD) == "2"  # the change was made
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["transition"] for r in records] == [
        "proposed", "approved", "started", "succeeded", "verified",
    ]  # fmt: skip
    assert records[-1]["outcome"]["ok"] is False
    assert records[-1]["outcome"]["interrupted"] is True
