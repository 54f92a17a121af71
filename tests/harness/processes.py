"""Start and always stop server processes for tests; record every pid to prove none leaks.

Children get PR_SET_PDEATHSIG=SIGKILL, so even a test run that is itself killed takes its
servers with it, and each runs in its own session so a stop reaches the whole group.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from oncall_drill.supervisor import pid_alive, start_in_session
from tests.harness.waiting import wait_until

__all__ = ["pid_alive"]  # re-exported: the tests check liveness the way the drill does

PR_SET_PDEATHSIG = 1

STARTED_PIDS: set[int] = set()
"""Every pid the harness started in this process; the session end checks they are all gone."""


@dataclass
class ListeningProcess:
    """A server process a test started: its `Popen`, the loopback port it listens on, its log."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:PORT."""
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        """What the process wrote so far."""
        return self.log_path.read_text(errors="replace")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def require_binary(name: str, package: str) -> str:
    """Path of an executable, or fail the test naming the Debian package to install."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} not found on PATH: install the Debian package '{package}' "
            f"(`apt-get install {package}`, or run `make setup` as root)",
            pytrace=False,
        )
    return path


def loaded_by(imports: str, package: str) -> subprocess.CompletedProcess[str]:
    """Run `imports` in a fresh interpreter; its stdout is the sorted list of `package`'s
    modules they loaded (`[]` when none: the import stayed light)."""
    code = (
        f"import sys\n{imports}\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] == {package!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start argv with output to log; it dies with this process and is recorded."""
    with log.open("wb") as out:
        proc = start_in_session(argv, out, preexec_fn=_die_with_parent)
    STARTED_PIDS.add(proc.pid)
    return proc


def stop(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGTERM the process group, SIGKILL if it lingers, and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)


@dataclass(frozen=True)
class Started:
    """A process `spawn` started and its log: what `wait_until` watches while it starts."""

    proc: subprocess.Popen[bytes]
    log: Path

    def exited(self) -> str | None:
        """Why waiting on it is pointless (it exited), or None while it runs."""
        code = self.proc.poll()
        return None if code is None else f"it exited with {code}"

    def log_tail(self) -> str:
        """The end of its log."""
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""


@contextlib.contextmanager
def serving(
    argv: list[str], log: Path, ready: Callable[[], bool], *, timeout: float, what: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`spawn` argv, wait until `ready()` (failing with its log), yield it, always `stop` it."""
    proc = spawn(argv, log)
    try:
        wait_until(ready, within=timeout, what=what, watching=Started(proc, log))
        yield proc
    finally:
        stop(proc)
