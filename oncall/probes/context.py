"""The backends a checklist run shares: clients made on first use, closed together at the end.

One `ProbeContext` lives for one checklist run (or one app session). Probe modules ask it for a
client with `await ctx.client(key, factory)`; the first caller builds it, later callers get the
same one, so eight steps reading Redis share one connection pool. Factories may be slow (the
kubernetes client takes ~2 s to import): they run once, and concurrent callers wait for that
one build instead of starting their own.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from oncall.settings.model import Settings

T = TypeVar("T")


class ProbeContext:
    """Settings plus lazily built, shared backend clients; `async with` closes them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._clients: dict[str, Any] = {}
        self._building: dict[str, asyncio.Future[Any]] = {}

    async def client(self, key: str, factory: Callable[[], T | Awaitable[T]]) -> T:
        """The client stored under `key`, built by `factory` on first use."""
        if key in self._clients:
            return cast(T, self._clients[key])
        pending = self._building.get(key)
        if pending is not None:
            return cast(T, await asyncio.shield(pending))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._building[key] = future
        try:
            made = factory()
            value = await made if inspect.isawaitable(made) else made
        except BaseException as exc:
            del self._building[key]
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody logs it as lost
            raise
        self._clients[key] = value
        del self._building[key]
        future.set_result(value)
        return cast(T, value)

    async def aclose(self) -> None:
        """Close every client that has `aclose` or `close` (awaiting it when it is async)."""
        clients, self._clients = self._clients, {}
        for value in clients.values():
            closer = getattr(value, "aclose", None) or getattr(value, "close", None)
            if closer is None:
                continue
            result = closer()
            if inspect.isawaitable(result):
                await result

    async def __aenter__(self) -> ProbeContext:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()
