"""Headless commands stay light: they load neither textual nor kubernetes (DESIGN §3, §7)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
