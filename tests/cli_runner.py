"""Run the real `oncall` command in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def run_oncall(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 30
) -> Result:
    """`python -m oncall ARGS` with a clean ONCALL_* environment plus `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ONCALL_")}
    proc = subprocess.run(
        [sys.executable, "-m", "oncall", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)
