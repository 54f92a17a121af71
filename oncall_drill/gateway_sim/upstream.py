"""Calls to the vLLM upstreams: OpenAI `/v1/chat/completions`, round-robin over the URLs.

Any failure — connection refused, timeout, a non-200 answer, a body without a message — is
an `UpstreamError`; the gateway turns it into a 503 for its client.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import aiohttp


class UpstreamError(Exception):
    """The LLM call failed; the message says how (for the 503 body and the log)."""


@dataclass(frozen=True)
class LlmAnswer:
    """A completed LLM call."""

    text: str
    upstream: str
    completion_tokens: int


class LlmUpstreams:
    """Round-robin client of one or more simulated vLLM servers."""

    def __init__(self, urls: tuple[str, ...], model: str) -> None:
        if not urls:
            raise ValueError("at least one vLLM URL is needed")
        self.urls = urls
        self.model = model
        self._next = itertools.cycle(urls)
        # Created on first use: a ClientSession belongs to the running event loop.
        self._client: aiohttp.ClientSession | None = None

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            await self._client.close()

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        timeout_seconds: float,
        ignore_eos: bool = False,
    ) -> LlmAnswer:
        """One chat completion from the next upstream in turn."""
        url = next(self._next)
        body: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": max_tokens}
        if ignore_eos:
            body["ignore_eos"] = True
        if self._client is None:
            self._client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
        try:
            async with self._client.post(
                f"{url}/v1/chat/completions",
                json=body,
                timeout=aiohttp.ClientTimeout(total=timeout_seconds),
            ) as response:
                status = response.status
                raw = await response.read()
        except TimeoutError as exc:
            raise UpstreamError(f"{url}: timed out after {timeout_seconds:g}s") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"{url}: {type(exc).__name__}: {exc}") from exc
        if status != 200:
            raise UpstreamError(f"{url}: HTTP {status}")
        try:
            data: Any = json.loads(raw)
            text = str(data["choices"][0]["message"]["content"])
            tokens = int(data.get("usage", {}).get("completion_tokens", 0))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise UpstreamError(f"{url}: malformed completion body") from exc
        return LlmAnswer(text=text, upstream=url, completion_tokens=tokens)
