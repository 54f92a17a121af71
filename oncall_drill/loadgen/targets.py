"""Loopback-only target URLs: the drill never sends traffic anywhere but 127.0.0.1.

Shared by the load generator and the simulators that call other simulators (the gateway calls
vLLM and Redis, the GPU exporter reads vLLM's state). It would sit naturally in
`oncall_drill.netutil`; it lives here because that module belongs to another part.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost"})
ALLOWED_SCHEMES = frozenset({"http", "redis"})


class NotLoopbackError(ValueError):
    """A URL that does not point at this machine's loopback interface."""


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and any 127.0.0.0/8 or ::1 address."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_loopback_url(url: str, schemes: frozenset[str] = ALLOWED_SCHEMES) -> str:
    """Return url without a trailing slash, or raise `NotLoopbackError` saying why not."""
    parts = urlsplit(url)
    if parts.scheme not in schemes:
        allowed = ", ".join(sorted(schemes))
        raise NotLoopbackError(f"{url!r}: scheme must be one of {allowed}")
    host = parts.hostname or ""
    if not is_loopback_host(host):
        raise NotLoopbackError(
            f"{url!r}: the drill only targets loopback (127.0.0.1), not {host or 'no host'!r}"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise NotLoopbackError(f"{url!r}: {exc}") from exc
    if port is None and parts.scheme == "http":
        raise NotLoopbackError(f"{url!r}: give the port explicitly")
    return url.rstrip("/")
