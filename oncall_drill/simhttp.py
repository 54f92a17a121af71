"""The serving lifecycle shared by the simple drill simulators (gateway, GPU exporter).

Listen on a loopback address, log one line saying where, serve until SIGTERM or SIGINT, then
stop cleanly with status 0. The vLLM simulator, the Kubernetes simulator and the cluster have
their own, longer lifecycles (slow start, engine death, several listeners) and share only
`signalled_stop`; the last two also share their `main` (`simulator_main`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from aiohttp import web

#: How long in-flight requests get to finish when the server stops.
SHUTDOWN_TIMEOUT_SECONDS = 0.5


def signalled_stop() -> asyncio.Event:
    """An event that SIGTERM or SIGINT sets (handlers on the running loop): a simulator waits
    on it, then stops cleanly, instead of dying of the signal mid-request."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def serve_until_signal(app: web.Application, host: str, port: int, banner: str) -> int:
    """Serve `app` on host:port until SIGTERM/SIGINT; `banner` goes to stderr once listening."""
    stop = signalled_stop()
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        print(banner, file=sys.stderr, flush=True)
        await stop.wait()
        return 0
    finally:
        await runner.cleanup()


class Main(Protocol):
    """A `python -m` module's entry point: argv (default: the process's), exit status."""

    def __call__(self, argv: list[str] | None = None) -> int: ...


def simulator_main(
    name: str,
    parse_args: Callable[[list[str] | None], argparse.Namespace],
    amain: Callable[[argparse.Namespace], Coroutine[Any, Any, int]],
) -> Main:
    """The `main` of a simulator module: parse argv, log warnings to stderr as
    `NAME LEVEL message` (the drill's log files hold several processes), run `amain`."""

    def main(argv: list[str] | None = None) -> int:
        logging.basicConfig(level=logging.WARNING, format=f"{name} %(levelname)s %(message)s")
        return asyncio.run(amain(parse_args(argv)))

    return main
