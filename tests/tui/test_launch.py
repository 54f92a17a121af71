"""`oncall` with no command: the app on a terminal, a usage error anywhere else."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from oncall.errors import EXIT_USAGE
from tests.harness.terminal import run_on_terminal

PROBE = """
import io, json, sys, contextlib
from oncall.cli.main import main
err = io.StringIO()
with contextlib.redirect_stderr(err):
    code = main([])
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'kubernetes'})
# Every command's parser (each command module) is built only for a command (issue 13.5).
commands = sorted(m for m in sys.modules if m.startswith('oncall.cli.') and m.endswith('_cmd'))
print(json.dumps({"code": code, "heavy": heavy, "stderr": err.getvalue(), "commands": commands}))
"""


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_without_a_terminal_the_app_is_a_usage_error_and_loads_no_textual(
    tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=30,
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] == EXIT_USAGE
    assert "the app needs a terminal" in report["stderr"]
    assert report["heavy"] == []
    assert report["commands"] == ["oncall.cli.config_cmd"]  # its settings loader only


def test_on_a_terminal_the_board_comes_up_and_q_quits(tmp_path: Path) -> None:
    """The real app, real services: Prometheus refused (a closed loopback port)."""
    url = f"http://127.0.0.1:{closed_port()}"
    config = tmp_path / "oncall.yaml"
    config.write_text("context: {name: launch-test}\n")
    run = run_on_terminal(
        ["--set", f"prometheus.url={url}"],
        answers=[("refreshed", "q")],
        env={"ONCALL_CONFIG": str(config), "TERM": "xterm-256color"},
        timeout=60,
    )
    assert run.code == 0, run.output[-2000:]
    assert "context launch-test" in run.output
    assert "LLMHighP99Latency" in run.output
    assert "? unknown" in run.output  # nobody answers at that port: unknown, not a crash
