"""Running a simulator: inside an existing event loop (`serve`) or on a thread of its own
(`SimulatorThread`, for synchronous callers such as tests and the drill CLI)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TypeVar

from aiohttp import web

from oncall_drill.kube_sim.server import create_app
from oncall_drill.kube_sim.sim import KubeSim
from oncall_drill.netutil import LOOPBACK, free_loopback_port

T = TypeVar("T")
SHUTDOWN_TIMEOUT_S = 3.0


async def serve(
    sim: KubeSim,
    port: int,
    host: str = LOOPBACK,
    *,
    tls: tuple[int, ssl.SSLContext] | None = None,
    routes: Iterable[web.RouteDef] = (),
) -> web.AppRunner:
    """Serve sim on host:port in the running loop (and with TLS on `tls`'s port when given),
    with extra drill `routes`; `await runner.cleanup()` stops it."""
    app = create_app(sim, routes)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        if tls is not None:
            await web.TCPSite(runner, host, tls[0], ssl_context=tls[1]).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


class SimulatorThread:
    """A simulator served from a daemon thread with its own event loop."""

    def __init__(self, sim: KubeSim, port: int | None = None) -> None:
        self.sim = sim
        self.port = port or free_loopback_port()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="kube-sim", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, timeout: float = 10.0) -> SimulatorThread:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"kube-sim did not start within {timeout} s")
        if self._error is not None:
            raise RuntimeError("kube-sim failed to start") from self._error
        return self

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            runner = await serve(self.sim, self.port)
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run fn on the simulator's loop (where the store lives) and return its result."""
        if self._loop is None:
            raise RuntimeError("kube-sim is not running")

        async def run() -> T:
            return fn()

        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(run(), self._loop)
        return future.result(timeout)

    def stop(self, timeout: float = 15.0) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            frame = sys._current_frames().get(self._thread.ident or -1)
            where = "".join(traceback.format_stack(frame)) if frame else "unknown"
            raise TimeoutError(
                f"kube-sim did not stop within {timeout} s; its thread is at:\n{where}"
            )

    def __enter__(self) -> SimulatorThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
