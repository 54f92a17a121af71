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


#: What to type at a prompt: a line (Enter is added), raw keys (bytes, e.g. b"\x04" for Ctrl-D),
#: or a callable that gets the output so far and returns the line.
Answer = str | bytes | Callable[[str], str]


def _keys(answer: Answer, output: bytes) -> bytes:
    if isinstance(answer, bytes):
        return answer
    text = answer(output.decode("utf-8", "replace")) if callable(answer) else answer
    return text.encode() + b"\n"


#: `python -c PYTHON_M_WITH_CTRL_C MODULE ARGS` is `python -m MODULE ARGS` with SIGINT handled
#: as on a terminal (how the child here starts; tests/alerts' --watch test too). A shell
#: runs background jobs with SIGINT ignored (`make test &`, `(make test &)`), a child inherits
#: an ignored signal across exec, and Python keeps it ignored: Ctrl-C would then never reach
#: the command under test (three clean runs on 2026-12-02 failed so). Set in the child, not
#: around the spawn: tests run this from worker threads too, where `signal.signal` refuses.
PYTHON_M_WITH_CTRL_C = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


def run_on_terminal(
    args: Sequence[str],
    answers: Sequence[tuple[str, Answer]] = (),
    *,
    env: dict[str, str] | None = None,
    timeout: float = 120.0,
    module: str = "oncall",
    typed_ahead: bytes = b"",
    interrupt_at: str | None = None,
) -> TerminalRun:
    """`python -m oncall ARGS` on a pty; for each (prompt text, answer) in order, wait for the
    prompt in the output, then type the answer (a callable may act, e.g. change the cluster
    behind the preview's back, before it returns the text to type). `module`: another entry
    point that ends in oncall's (a test's wrapper around it). `typed_ahead`: keys already in the
    terminal's input buffer before the process starts. `interrupt_at`: once that text is on
    the terminal, the process gets SIGINT, as Ctrl-C sends it to the foreground process."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ONCALL_")}
    master, slave = os.openpty()
    if typed_ahead:  # in the input buffer before the process even starts
        os.write(master, typed_ahead)
    proc = subprocess.Popen(
        [sys.executable, "-c", PYTHON_M_WITH_CTRL_C, module, *args],
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
                os.write(master, _keys(answer, output))
            if interrupt_at is not None and interrupt_at.encode() in output:
                proc.send_signal(signal.SIGINT)
                interrupt_at = None
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        with contextlib.suppress(OSError):
            os.close(master)
    return TerminalRun(code, output.decode("utf-8", "replace").replace("\r\n", "\n"))
