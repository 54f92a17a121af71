"""What the HTTP backends (Prometheus, vLLM) share: a client bound to one URL, and one
exchange under a whole-call timeout.

httpx's own timeouts bound each phase (connect, read) separately; a peer that trickles bytes
could outlast them, so the whole call also runs under `asyncio.timeout`. Transport failures
become `BackendError` reasons: "timeout", "refused", or "bad payload" (the peer spoke
something other than HTTP, or hung up mid-answer, or its answer was larger than the backend's
`MAX_ANSWER_BYTES`, received or inflated: `answer_size`). An HTTP error status becomes "auth" for
401/403 (a token missing or refused, or an SSO proxy in front) and "http <status>" otherwise.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Awaitable, Mapping
from typing import ClassVar

import httpx

from oncall.backends.answer_size import (
    ACCEPT_ENCODING,
    MIB,
    RAW,
    AnswerTooLarge,
    BoundedTransport,
    inflated_body,
)
from oncall.backends.closing import AsyncClosing
from oncall.errors import BackendError


def status_reason(status: int) -> str:
    """The BackendError reason of an HTTP error status: "auth" for 401/403, else "http N"."""
    return "auth" if status in (401, 403) else f"http {status}"


def cancel_requests() -> int:
    """How many cancellations of the current task are pending (`Task.cancelling`)."""
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


def raise_swallowed_cancel(before: int) -> None:
    """Raise the cancellation a library swallowed: `before` is `cancel_requests()` taken
    before the call. anyio#1214 (anyio 4.13-4.16): a `Task.cancel()` that lands while
    `connect_tcp` cancels its other Happy Eyeballs attempts is taken for anyio's own, and
    the request returns (or fails with ConnectError) while the task still counts the
    cancellation: a step's timeout or a Ctrl-C would then not end the call. A timeout's own
    cancellation is taken back (`uncancel`) before this looks, so it is not counted."""
    if cancel_requests() > before:
        raise asyncio.CancelledError


async def exchange(
    request: Awaitable[httpx.Response], *, backend: str, target: str, within: float
) -> httpx.Response:
    """Await one httpx request, bounded by `within` seconds; transport failures as BackendError;
    a cancellation of the caller is a CancelledError, whatever httpx made of it."""
    before = cancel_requests()
    try:
        return await _bounded(request, backend=backend, target=target, within=within)
    finally:
        raise_swallowed_cancel(before)


async def _bounded(
    request: Awaitable[httpx.Response], *, backend: str, target: str, within: float
) -> httpx.Response:
    try:
        async with asyncio.timeout(within):
            return await request
    except (TimeoutError, httpx.TimeoutException) as exc:
        detail = f"no answer within {within:g}s"
        raise BackendError(backend, target, "timeout", detail) from exc
    except AnswerTooLarge as exc:
        raise BackendError(backend, target, "bad payload", str(exc)) from exc
    except httpx.ConnectError as exc:
        detail = str(exc) or "connection refused"
        raise BackendError(backend, target, "refused", detail) from exc
    except httpx.HTTPError as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise BackendError(backend, target, "bad payload", detail) from exc


@functools.cache
def verifying_context() -> ssl.SSLContext:
    """The TLS context httpx makes for `verify=True` without the environment (as `trust_env=
    False` below), made once per process: making it loads the CA bundle, ≈ 20–50 ms of CPU
    that each client paid again (two Prometheus clients in every `oncall check`)."""
    return httpx.create_ssl_context(trust_env=False)


def _tls_for(url: str) -> ssl.SSLContext:
    """The verifying context for an https URL. An http one never uses TLS (its requests are
    paths below it; redirects are not followed), so it gets a context that trusts no CA at
    all rather than pay for loading the bundle (a cold `oncall check`): were TLS ever used,
    it would refuse every certificate."""
    if url.lower().startswith("http://"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return verifying_context()


class HttpBackend(AsyncClosing):
    """One connection pool to one backend URL; use as `async with Client(...) as c`.

    Subclasses name their backend (`BACKEND`, as errors report it) and add the API calls;
    `MAX_ANSWER_BYTES` bounds each answer, received and inflated (`answer_size`).
    """

    BACKEND: ClassVar[str]
    #: 64 MiB: Prometheus' rules and Alertmanager's alerts are a few MB at fleet size
    #: (5,000 alerts: 2.4 MB), an order of magnitude and more below it.
    MAX_ANSWER_BYTES: ClassVar[int] = 64 * MIB

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        # What httpx's client would make itself: no environment (loopback and
        # cluster-internal URLs never route through an environment proxy), its TLS context.
        inner = transport or httpx.AsyncHTTPTransport(verify=_tls_for(self.url), trust_env=False)
        self._http = httpx.AsyncClient(
            base_url=self.url,
            timeout=httpx.Timeout(timeout),
            headers={"Accept-Encoding": ACCEPT_ENCODING, **(headers or {})},
            transport=BoundedTransport(inner, self.MAX_ANSWER_BYTES),
            trust_env=False,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def _error(
        self, reason: str, detail: str = "", *, http_status: int | None = None
    ) -> BackendError:
        error = BackendError(self.BACKEND, self.url, reason, detail)
        error.http_status = http_status
        return error

    async def _exchange(self, request: Awaitable[httpx.Response]) -> httpx.Response:
        return await exchange(request, backend=self.BACKEND, target=self.url, within=self.timeout)

    async def _exchange_encoded(self, request: httpx.Request) -> httpx.Response:
        """The answer with its body as it came, still compressed: `decoded_in_thread` turns it
        into the answer `_exchange` gives. Inflating a large gzip answer (Prometheus compresses
        /api/v1/rules: megabytes with thousands of alerts) is CPU the event loop need not
        spend; zlib lets the interpreter lock go while it works in another thread. Both the
        bytes received and those inflated are bounded by `MAX_ANSWER_BYTES`."""
        request.extensions[RAW] = True  # counted by the transport, inflated in the worker

        async def fetch() -> httpx.Response:
            response = await self._http.send(request, stream=True)
            try:
                raw = b"".join([chunk async for chunk in response.aiter_raw()])
            finally:
                await response.aclose()
            headers, body = inflated_body(response, raw, self.MAX_ANSWER_BYTES)
            return httpx.Response(
                response.status_code,
                headers=headers,
                stream=body,
                request=request,
                extensions=response.extensions,
            )

        return await self._exchange(fetch())


def decoded_in_thread(response: httpx.Response) -> httpx.Response:
    """Read (inflate, as its Content-Encoding said) an answer of `_exchange_encoded`; run it
    in a worker thread. The bytes are those `_exchange` gives; past the backend's bound it
    raises AnswerTooLarge, an httpx.DecodingError."""
    response.read()
    return response
