"""One Kubernetes API exchange over httpx: TLS and credentials from a `KubeConnection`, bounded.

This is what oncall uses instead of the official `kubernetes` client (which imports in ~0.4 s,
builds pydantic validators on each API method's first call, and requires aiohttp): the probes
and remediations need a dozen REST calls on JSON they read as dicts anyway.

- TLS as the kubeconfig says (CA, client certificate, `insecure-skip-tls-verify`, and
  `tls-server-name` as the name sent and verified); no environment proxy (`trust_env=False`).
- Credentials per request from the connection's `CredentialSource`: a token file re-read, an
  exec plugin re-run in a worker thread when its credential expired; after a 401 the next
  request makes it anew (client-go's rule). A request is never retried: a write sent twice
  could act on an object the operator never saw.
- Each exchange runs under httpx's phase timeouts and a whole-call `asyncio.timeout`, so a
  server that trickles its answer cannot outlast `timeout`.
- Each answer is bounded (`MAX_ANSWER_BYTES`, received and inflated: `BoundedTransport` of
  oncall/backends/answer_size.py, as for every HTTP backend): an API server, or a proxy
  posing as one, that sends an endless body or a gzip bomb is a "bad payload" naming the
  bound, not a process holding gigabytes.
- One httpx pool per event loop (and client certificate): a writer opened under one
  `asyncio.run` and used under the next gets a fresh pool instead of a dead loop's sockets.

Transport failures become `BackendError("kubernetes", target, reason)`: "timeout", "tls" (a
handshake or certificate failure), "refused", "unreachable", "disconnected", "config" (the
kubeconfig or an exec plugin failed); HTTP statuses are left to the caller (`KubeReader`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

import httpx

from oncall.backends.answer_size import ACCEPT_ENCODING, MIB, AnswerTooLarge, BoundedTransport
from oncall.backends.http import cancel_requests, raise_swallowed_cancel
from oncall.backends.kube_config import Credential, KubeConfigError, KubeConnection
from oncall.errors import BackendError

BACKEND = "kubernetes"
USER_AGENT = "oncall (kubernetes REST over httpx)"


def _json_default(value: object) -> str:
    # The official client serialises datetimes with isoformat(); MicroTime accepts that.
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def encode_json(body: Any) -> bytes:
    return json.dumps(body, default=_json_default).encode("utf-8")


def _cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first `kind` in the cause chain (httpx → httpcore → anyio → the socket's error)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class KubeHttp:
    """Requests to one API server; `send` answers the response of any status."""

    #: 256 MiB. Lists are paged (oncall/backends/kube.py: 500 items a page, ~1-2 MB), but a
    #: server may ignore `limit` (aggregated APIs, some proxies) and send a whole list in one
    #: answer: the drill's 5,000-pod fleet is 10-20 MB, and real pods with managedFields run
    #: 10-20 KB each, so the 10,000 pods the reader reads at most (LIST_MAX_PAGES) can pass
    #: 150 MB. 256 MiB lets that through with headroom, and still stops a bomb of gigabytes.
    MAX_ANSWER_BYTES: int = 256 * MIB

    def __init__(self, conn: KubeConnection, *, timeout: float, target: str) -> None:
        self.conn = conn
        self.timeout = float(timeout)
        self.target = target
        self._pools: dict[
            tuple[int, bytes | None], tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]
        ] = {}
        self._refresh = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def error(self, reason: str, detail: str = "", status: int | None = None) -> BackendError:
        error = BackendError(BACKEND, self.target, reason, detail)
        error.http_status = status
        return error

    async def _credential(self) -> Credential:
        source = self.conn.credentials
        try:
            if not source.stale():
                return source.current()
            loop = asyncio.get_running_loop()
            if self._loop is not loop:  # an asyncio.Lock belongs to one loop
                self._loop, self._refresh = loop, asyncio.Lock()
            async with self._refresh:  # one plugin run for concurrent requests
                return await asyncio.to_thread(source.current)
        except KubeConfigError as exc:
            raise self.error("config", str(exc)) from exc

    def _held(
        self, credential: Credential
    ) -> tuple[tuple[int, bytes | None], httpx.AsyncClient | None]:
        loop = asyncio.get_running_loop()
        key = (id(loop), credential.cert_pem)
        held = self._pools.get(key)
        for old in [k for k, (lp, _) in self._pools.items() if lp.is_closed()]:
            del self._pools[old]  # a finished asyncio.run's sockets: nothing to close them on
        return key, held[1] if held is not None and held[0] is loop else None

    def _make_client(self, credential: Credential) -> httpx.AsyncClient:
        """A pool (blocking: the first httpx client imports httpcore's parts, ~0.1 s)."""
        verify: ssl.SSLContext | bool = False
        if self.conn.https:
            try:
                verify = self.conn.ssl_context(credential)
            except KubeConfigError as exc:
                raise self.error("config", str(exc)) from exc
        # The TLS context goes on the transport: a client given a transport does not pass
        # its own `verify` on.
        inner = httpx.AsyncHTTPTransport(verify=verify, trust_env=False)
        return httpx.AsyncClient(
            base_url=self.conn.server,
            timeout=httpx.Timeout(self.timeout),
            trust_env=False,
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING},
            transport=BoundedTransport(inner, self.MAX_ANSWER_BYTES),
        )

    async def _pool(self, credential: Credential) -> httpx.AsyncClient:
        key, client = self._held(credential)
        if client is None:
            # Made in a worker thread: on the loop it would stall the app's first checklist
            # (a key press waiting ~0.1 s, scripts/bench/tui.py).
            client = await asyncio.to_thread(self._make_client, credential)
            key, raced = self._held(credential)
            if raced is not None:  # a concurrent first request made one meanwhile
                await client.aclose()
                return raced
            self._pools[key] = (asyncio.get_running_loop(), client)
        return client

    async def prepare(self) -> None:
        """Make this loop's pool now (the reader's `open` does, off the loop); not for a
        credential already expired: the first request makes it anew, and the pool then."""
        if not self.conn.credentials.stale():
            await self._pool(self.conn.credentials.current())

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int | bool | None] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> httpx.Response:
        """One request; transport failures as BackendError, any HTTP status returned."""
        credential = await self._credential()
        headers = {"Accept": accept}
        if credential.authorization:
            headers["Authorization"] = credential.authorization
        content = None
        if body is not None:
            content, headers["Content-Type"] = encode_json(body), content_type
        query = {
            k: ("true" if v else "false") if isinstance(v, bool) else str(v)
            for k, v in (params or {}).items()
            if v is not None
        }
        extensions = {}
        if self.conn.tls_server_name:
            extensions["sni_hostname"] = self.conn.tls_server_name
        client = await self._pool(credential)
        before = cancel_requests()
        try:
            async with asyncio.timeout(self.timeout):
                response = await client.request(
                    method, path, params=query, content=content, headers=headers,
                    extensions=extensions,
                )  # fmt: skip
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise self.error("timeout", f"no answer within {self.timeout:g}s") from exc
        except AnswerTooLarge as exc:
            raise self.error("bad payload", str(exc)) from exc
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc
        finally:
            raise_swallowed_cancel(before)  # anyio#1214: see oncall.backends.http
        if response.status_code == 401:
            self.conn.credentials.invalidate()
        return response

    def _transport_error(self, exc: httpx.HTTPError) -> BackendError:
        tls = _cause(exc, ssl.SSLError)
        if tls is not None:
            return self.error("tls", str(tls))
        text = str(exc) or type(exc).__name__
        if isinstance(exc, httpx.ConnectError):
            refused = _cause(exc, ConnectionRefusedError)
            if refused is not None:
                return self.error("refused", f"connection refused ({refused})")
            return self.error("unreachable", str(_cause(exc, OSError) or text))
        if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError):
            return self.error("disconnected", text)
        return self.error("bad payload", f"{type(exc).__name__}: {text}")

    async def aclose(self) -> None:
        pools, self._pools = self._pools, {}
        for loop, client in pools.values():
            if loop is asyncio.get_running_loop():
                await client.aclose()

    def close(self) -> None:
        """Close the pools without awaiting: on the running loop as a task; a finished
        `asyncio.run`'s pool is only dropped (its loop, needed to close sockets, is gone)."""
        pools, self._pools = self._pools, {}
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, client in pools.values():
            if running is not None and loop is running:
                task = running.create_task(client.aclose())
                _closing.add(task)
                task.add_done_callback(_closing.discard)
            elif not loop.is_closed() and not loop.is_running():
                with contextlib.suppress(Exception):
                    loop.run_until_complete(client.aclose())


_closing: set[asyncio.Task[None]] = set()  # close() tasks, referenced until done
