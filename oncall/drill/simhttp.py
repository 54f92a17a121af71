"""The serving lifecycle shared by the simple drill simulators (gateway, GPU exporter).

Listen on a loopback address, log one line saying where, serve until SIGTERM or SIGINT, then
stop cleanly with status 0. The vLLM simulator has its own, longer lifecycle (slow start,
engine death) and does not use this.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from aiohttp import web

#: How long in-flight requests get to finish when the server stops.
SHUTDOWN_TIMEOUT_SECONDS = 0.5


async def serve_until_signal(app: web.Application, host: str, port: int, banner: str) -> int:
    """Serve `app` on host:port until SIGTERM/SIGINT; `banner` goes to stderr once listening."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        print(banner, file=sys.stderr, flush=True)
        await stop.wait()
        return 0
    finally:
        await runner.cleanup()
