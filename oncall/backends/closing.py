"""`async with client:` for the backend clients: the context hands the client itself back and
closes it on the way out, whatever happened inside (each client defines `aclose`)."""

from __future__ import annotations

from typing import Self


class AsyncClosing:
    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        raise NotImplementedError
