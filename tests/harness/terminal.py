"""Run a command on a pseudo-terminal and answer its prompts, as a person at a keyboard would.

The typed confirmation of `oncall remediate` reads only from a terminal; tests drive it here.
Every read is bounded by the deadline; a command still running at the end is killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class TerminalRun:
    code: int
    output: str


def run_on_terminal(
    args: Sequence[str],
    answers: Sequence[tuple[str, str | Callable[[str], str]]] = (),
    *,
    env: dict[str, str] | None = None,
    timeout: float = 120.0,
    module: str = "oncall",
) -> TerminalRun:
    """`python -m oncall ARGS` on a pty; for each (prompt text, answer) in order, wait for the
    prompt in the output, then type the answer (a callable gets the output so far: it may act,
    e.g. change the cluster behind the preview's back, and returns the text to type). `module`:
    another entry point that ends in oncall's (a test's wrapper around it)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ONCALL_")}
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=slave, stdout=slave, stderr=slave, env={**base, **(env or {})}, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    output = b""
    pending = list(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                if not chunk:
                    break
                output += chunk
            elif proc.poll() is not None:
                break
            if pending and pending[0][0].encode() in output:
                _, answer = pending.pop(0)
                text = answer(output.decode("utf-8", "replace")) if callable(answer) else answer
                os.write(master, text.encode() + b"\n")
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        with contextlib.suppress(OSError):
            os.close(master)
    return TerminalRun(code, output.decode("utf-8", "replace").replace("\r\n", "\n"))
