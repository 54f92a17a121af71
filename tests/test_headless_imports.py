"""Headless commands stay light: they load neither textual nor kubernetes (DESIGN §3, §7)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.faults import refused_port

PROBE = """
import io, json, sys, contextlib
from oncall.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'kubernetes', 'rich'})
print(json.dumps({"code": code, "heavy": heavy}))
"""


@pytest.mark.parametrize("argv", [["--help"], ["config", "show"], ["config", "show", "-o", "json"]])
def test_headless_command_does_not_import_textual_or_kubernetes(
    argv: list[str], tmp_path: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=30,
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] == 0, proc.stderr
    assert report["heavy"] == []


def test_probe_would_notice_a_heavy_import(tmp_path: Path) -> None:
    """The check above can fail: importing textual first shows up in the report."""
    proc = subprocess.run(
        [sys.executable, "-c", "import textual\n" + PROBE, "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=30,
    )
    assert json.loads(proc.stdout.strip().splitlines()[-1])["heavy"] == ["rich", "textual"]


RUNBOOK = """\
alert: HeadlessProbe
title: A runbook whose steps ask Prometheus and Redis only
steps:
  - id: up
    title: Prometheus answers
    probe: prometheus.query
    params: {query: up}
  - id: redis
    title: Redis answers
    probe: redis.stats
"""


@pytest.mark.parametrize("argv", [["alerts"], ["alerts", "-o", "json"], ["check", "HeadlessProbe"]])
def test_alerts_and_check_do_not_import_textual(argv: list[str], tmp_path: Path) -> None:
    """`oncall alerts` and `oncall check` reach Prometheus and the backends through the service,
    never through the app: with every backend refusing they exit 3, and load no textual (nor
    kubernetes: this runbook has no Kubernetes step). rich they do load, through httpx: its
    package imports its own command line (`httpx._main`, rich and click) whenever they are
    installed, and textual's dependency on rich installs it."""
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "HeadlessProbe.yaml").write_text(RUNBOOK, encoding="utf-8")
    settings = {
        "prometheus": {"url": f"http://127.0.0.1:{refused_port()}", "timeout": "1s"},
        "redis": {"url": f"redis://127.0.0.1:{refused_port()}/0", "timeout": "1s"},
        "runbooks": {"dirs": [str(tmp_path / "runbooks")]},
    }
    (tmp_path / "oncall.yaml").write_text(json.dumps(settings), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=60,
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] == 3, proc.stderr
    assert set(report["heavy"]) <= {"rich"}
