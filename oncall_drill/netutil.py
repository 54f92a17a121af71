"""Loopback networking helpers shared by the drill simulators and their orchestration.

Everything the drill starts listens on 127.0.0.1 only.
"""

from __future__ import annotations

import socket
import time

LOOPBACK = "127.0.0.1"


def free_loopback_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def port_accepts(port: int, host: str = LOOPBACK, timeout: float = 0.2) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(port: int, timeout: float, host: str = LOOPBACK) -> bool:
    """Wait until host:port accepts connections; False if it did not within timeout seconds.

    Polls: a process that is starting up offers nothing else to wait on.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_accepts(port, host):
            return True
        time.sleep(0.02)
    return False
