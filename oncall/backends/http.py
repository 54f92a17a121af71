"""One HTTP exchange under a whole-call timeout, shared by the HTTP backends (Prometheus, vLLM).

httpx's own timeouts bound each phase (connect, read) separately; a peer that trickles bytes
could outlast them, so the whole call also runs under `asyncio.timeout`. Transport failures
become `BackendError` reasons: "timeout", "refused", or "bad payload" (the peer spoke
something other than HTTP, or hung up mid-answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import httpx

from oncall.errors import BackendError


async def exchange(
    request: Awaitable[httpx.Response], *, backend: str, target: str, within: float
) -> httpx.Response:
    """Await one httpx request, bounded by `within` seconds; transport failures as BackendError."""
    try:
        async with asyncio.timeout(within):
            return await request
    except (TimeoutError, httpx.TimeoutException) as exc:
        detail = f"no answer within {within:g}s"
        raise BackendError(backend, target, "timeout", detail) from exc
    except httpx.ConnectError as exc:
        detail = str(exc) or "connection refused"
        raise BackendError(backend, target, "refused", detail) from exc
    except httpx.HTTPError as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise BackendError(backend, target, "bad payload", detail) from exc
