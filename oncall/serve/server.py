"""Start and stop `oncall serve`: the pool, the notifier, the HTTP listener, until a signal.

TLS when `serve.tls_cert_file` and `serve.tls_key_file` are set (else plain HTTP, on loopback
or behind a proxy that terminates TLS). SIGTERM and SIGINT stop it: the listener closes, the
running checklists are cancelled (their firings' claims expire; another replica or the next
repeat checks them).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import ssl
import sys
from dataclasses import dataclass

from aiohttp import web

from oncall.errors import UsageError
from oncall.serve.app import make_app
from oncall.serve.auth import check_exposure, load_credentials, split_listen
from oncall.serve.metrics import ServeMetrics
from oncall.serve.notify import Notifier
from oncall.serve.pool import Pool
from oncall.service.verdicts import store_from_settings
from oncall.settings import Settings

log = logging.getLogger("oncall.serve")


@dataclass
class Running:
    """A started serve (tests drive one in-process); `stop` ends it."""

    runner: web.AppRunner
    pool: Pool
    notifier: Notifier
    metrics: ServeMetrics
    port: int

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.pool.aclose()  # the notifier and the store with it, on the pool's loop


def replica_name() -> str:
    return os.environ.get("ONCALL_SERVE_REPLICA") or f"{socket.gethostname()}:{os.getpid()}"


def _tls(settings: Settings) -> ssl.SSLContext | None:
    serve = settings.serve
    if not (serve.tls_cert_file or serve.tls_key_file):
        return None
    if not (serve.tls_cert_file and serve.tls_key_file):
        raise UsageError("serve: TLS needs both tls_cert_file and tls_key_file")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(serve.tls_cert_file, serve.tls_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"serve: cannot load the TLS certificate pair: {exc}") from None
    return context


async def start(settings: Settings, *, listen: str | None = None) -> Running:
    serve = settings.serve
    host, port = split_listen(listen or serve.listen)
    credentials = load_credentials(serve)
    check_exposure(host, credentials)
    tls = _tls(settings)
    metrics = ServeMetrics()
    notifier = Notifier(list(serve.notify), metrics)
    pool = Pool(settings, store_from_settings(settings), notifier, metrics, replica=replica_name())
    app = make_app(
        pool, metrics, credentials, path=serve.webhook_path, max_body=serve.max_body_bytes
    )
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise UsageError(f"serve: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = port
    server = getattr(site, "_server", None)
    sockets = getattr(server, "sockets", None) or []
    if sockets:
        bound = sockets[0].getsockname()[1]
    pool.start()
    return Running(runner, pool, notifier, metrics, bound)


async def serve_forever(settings: Settings, *, listen: str | None = None) -> int:
    running = await start(settings, listen=listen)
    scheme = "https" if settings.serve.tls_cert_file else "http"
    host, _ = split_listen(listen or settings.serve.listen)
    print(
        f"oncall serve: listening on {scheme}://{host}:{running.port}"
        f"{settings.serve.webhook_path} (replica {running.pool.replica})",
        file=sys.stderr,
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await running.stop()
    return 0


def run(settings: Settings, *, listen: str | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    # One line per probe request would drown serve's own (one per verdict, per problem).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return asyncio.run(serve_forever(settings, listen=listen))
