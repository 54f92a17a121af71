"""Start and always stop server processes for tests; record every pid to prove none leaks.

Children get PR_SET_PDEATHSIG=SIGKILL, so even a test run that is itself killed takes its
servers with it, and each runs in its own session so a stop reaches the whole group.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from oncall_drill.supervisor import pid_alive, start_in_session

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


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    """Poll condition until true; fail with the server log if it never is or the server died.

    Polling is the only way to learn that a freshly started server listens.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)  # the poll's interval: a wait on the condition, bounded above
    tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
    pytest.fail(f"gave up after {timeout:g}s waiting for {what}\n{tail}", pytrace=False)


@contextlib.contextmanager
def serving(
    argv: list[str], log: Path, ready: Callable[[], bool], *, timeout: float, what: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`spawn` argv, wait until `ready()` (failing with its log), yield it, always `stop` it."""
    proc = spawn(argv, log)
    try:
        wait_until(ready, timeout=timeout, what=what, proc=proc, log=log)
        yield proc
    finally:
        stop(proc)


async def eventually(
    condition: Callable[[], Awaitable[bool]], *, within: float, what: str, interval: float = 0.2
) -> None:
    """Await condition until true, or fail after `within` seconds.

    For state a server only exposes by being asked again (a rule evaluated every second, a
    target scraped every second): there is no event to wait on, so we poll, bounded.
    """
    deadline = time.monotonic() + within
    while not await condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"gave up after {within:g}s waiting for {what}", pytrace=False)
        await asyncio.sleep(interval)  # the poll's interval, bounded by `within`
